#!/bin/bash
# Fails (exit 1), listing each item, if the test clusters left anything behind: a process whose
# command line names $STATE or a cluster namespace or that sits in a cluster's cgroup, a mount under $STATE, a spk* or pod (cni-*)
# network namespace, a spk* link, a host route to a cluster pod range, a /spkube* cgroup, a KUBE-*
# iptables chain in the host, or $STATE itself (containerd root and state). With a baseline file
# (lib.sh's snapshot, taken before up): a cni-* netns, a dir or a shim socket containerd or CNI
# made outside their roots that the baseline lacks.
source "$(dirname "$0")/lib.sh"
BASE=${1:-/dev/null}
left=()
for p in $(ls /proc | grep -E '^[0-9]+$'); do
  [ "$p" = $$ ] && continue
  c=$(tr "\0" " " 2>/dev/null < /proc/$p/cmdline) || continue
  case "$c" in *"$STATE"*|*"/run/netns/spk"*) case "$c" in *check-clean.sh*) ;; *) left+=("process $p: ${c:0:120}");; esac;; esac
done
for p in $(cgroup_pids 'spkube*'); do
  left+=("process $p in a cluster cgroup: $(tr '\0' ' ' 2>/dev/null < /proc/$p/cmdline | cut -c1-100)")
done
while read -r m; do left+=("mount $m"); done < <(awk '{print $5}' /proc/self/mountinfo | grep "^$STATE" || true)
for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
  case "$ns" in spk*) left+=("netns $ns");; cni-*) grep -qx "$ns" "$BASE" || left+=("netns $ns");; esac
done
while read -r l; do left+=("link $l"); done < <(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^spk' || true)
while read -r r; do left+=("route $r"); done < <(ip route show | grep -E '^198\.18\.(128|144)\.0/20' || true)
for h in $(cgroup_dirs 'spkube*'); do left+=("cgroup $h"); done
for ipt in iptables ip6tables; do for t in filter nat mangle; do
  for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N KUBE-/{print $2}'); do left+=("$ipt -t $t chain $c"); done
done; done
[ -e "$STATE" ] && left+=("state dir $STATE")
if [ "$BASE" != /dev/null ]; then  # what containerd and CNI made outside their roots
  for x in $(snapshot | grep -E '^(dir|sock):'); do grep -qx "$x" "$BASE" || left+=("${x%%:*} ${x#*:}"); done
fi
if [ ${#left[@]} -gt 0 ]; then printf 'left behind: %s\n' "${left[@]}" >&2; exit 1; fi
echo "nothing left behind"
