#!/bin/bash
# Brings up the two test clusters (spk1, spk2): installs the missing Debian packages, builds the
# Kubernetes binaries (cached outside the clone, k8s/build.sh), the pause image and the agent
# image (`spanperf image`), then starts both clusters in their own network namespaces.
# kubeconfigs: $STATE/c1/kubeconfig, $STATE/c2/kubeconfig (kubectl wrappers beside them).
# On failure it tears down what it started (down.sh), unless KEEP=1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
T0=$(ts)
if [ -e "$STATE" ]; then echo "up: $STATE exists: clusters up already? run test/kube/down.sh first" >&2; exit 1; fi
pkgs=(containerd runc etcd-server containernetworking-plugins iptables conntrack bc curl openssl)
missing=(); for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "up: installing ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
T1=$(ts)
K8S_BIN=$("$HERE/k8s/build.sh" | tail -1); export K8S_BIN
T2=$(ts)
mkdir -p "$IMAGES"
snapshot > "$STATE/baseline"
cat /proc/sys/net/ipv4/ip_forward > "$STATE/ip_forward"
trap '[ "${KEEP:-0}" = 1 ] || "$HERE/down.sh"' ERR
make -s -C "$REPO" image IMAGE_TAG="$AGENT_IMAGE" >/dev/null
cp "$REPO/bin/spanperf.tar" "$IMAGES/spanperf.tar"
CGO_ENABLED=0 go build -C "$REPO" -trimpath -ldflags "-s -w" -o "$STATE/pause" ./test/kube/pause
"$REPO/bin/spanperf-static" image --binary "$STATE/pause" --tag "$PAUSE_IMAGE" -o "$IMAGES/pause.tar" >/dev/null
# the server image of the nginx and PostgreSQL tests in pods (server_image:), from the host's packages
OUT=$IMAGES/server.tar "$HERE/server-image.sh" >/dev/null
T3=$(ts)
sysctl -qw net.ipv4.ip_forward=1   # the host routes between the clusters' pod ranges; down.sh restores it
"$HERE/cluster-up.sh" 1
"$HERE/cluster-up.sh" 2
# One kubeconfig with both clusters: contexts spk1 and spk2, and east and west naming the same
# clusters, as examples/icpe25.yaml and the README's worked example do.
python3 - "$STATE" <<'PY'
import re, sys
state = sys.argv[1]
def parts(n):
    kc = open(f"{state}/c{n}/kubeconfig").read()
    server = re.search(r'server: "([^"]+)"', kc).group(1)
    token = re.search(r'token: (\S+)\}', kc).group(1)
    return server, token
out = ["apiVersion: v1", "kind: Config", "clusters:"]
for n in (1, 2):
    out.append(f'- name: spk{n}\n  cluster: {{server: "{parts(n)[0]}", insecure-skip-tls-verify: true}}')
out.append("users:")
for n in (1, 2):
    out.append(f"- name: spk{n}\n  user: {{token: {parts(n)[1]}}}")
out.append("contexts:")
for name, n in (("spk1", 1), ("spk2", 2), ("east", 1), ("west", 2)):
    out.append(f"- name: {name}\n  context: {{cluster: spk{n}, user: spk{n}}}")
out.append("current-context: spk1")
open(f"{state}/kubeconfig", "w").write("\n".join(out) + "\n")
PY
chmod 600 "$STATE/kubeconfig"
# metrics-server on both clusters, so the metrics API serves pods' CPU (METRICS_SERVER=0 skips it)
T4=$(ts)
if [ "${METRICS_SERVER:-1}" != 0 ]; then
  "$HERE/metrics-server.sh" up 1 & ms1=$!
  "$HERE/metrics-server.sh" up 2 || { wait $ms1; exit 1; }
  wait $ms1
fi
echo "up: packages $(echo "$T1 - $T0" | bc | xargs printf '%.1f') s, kubernetes binaries $(echo "$T2 - $T1" | bc | xargs printf '%.1f') s," \
     "images $(echo "$T3 - $T2" | bc | xargs printf '%.1f') s, clusters $(echo "$T4 - $T3" | bc | xargs printf '%.1f') s," \
     "metrics-server $(since $T4) s, total $(since $T0) s"
