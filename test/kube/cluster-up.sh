#!/bin/bash
# Starts single-node cluster N (1 or 2) in network namespace spk$N: containerd (own root, state,
# socket) + CNI bridge + etcd + kube-apiserver + controller-manager + scheduler + kubelet +
# kube-proxy (iptables, inside the namespace). Needs the binaries (K8S_BIN) and the images in
# $STATE/images (up.sh makes both). Writes $STATE/cN/kubeconfig, usable from the host.
# Ported from the worked example in shared/kube-local (see its README for each gotcha).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cluster_vars "${1:?usage: cluster-up.sh N}"
BIN=${K8S_BIN:?K8S_BIN: the kubernetes bin directory (k8s/build.sh prints it)}
waitfor() { local n=0; until eval "$1" >/dev/null 2>&1; do sleep 0.1; n=$((n+1)); [ $n -lt ${2:-600} ] || { echo "cluster $N: timeout: $1" >&2; exit 1; }; done; }
mkdir -p "$D"/{certs,net.d,cni-ipam,runc,containerd/root,containerd/state,kubelet,kubelet-pki,logs,pod-logs}
T0=$(ts)

# cgroup root of this kubelet (cgroupfs driver): it must exist in every v1 hierarchy
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then mkdir -p "/sys/fs/cgroup${CGROOT}"   # v2
else for h in /sys/fs/cgroup/*/; do case "$h" in */unified/) continue;; esac; mkdir -p "$h${CGROOT#/}"; done; fi

# the namespace, its veth to the host, the host's route to the pod CIDR
ip netns add $NS; ip -n $NS link set lo up
ip link add spkv${N}h type veth peer name spkv${N}n netns $NS
ip addr add $VETH_HOST/30 dev spkv${N}h; ip link set spkv${N}h up
ip -n $NS addr add $VETH_NS/30 dev spkv${N}n; ip -n $NS link set spkv${N}n up
ip -n $NS route add default via $VETH_HOST
ip route add $POD_CIDR via $VETH_NS
$X sysctl -qw net.ipv4.ip_forward=1
# the pod bridge, made here so its address can be the node IP (kubelet refuses loopback)
$X ip link add $BR type bridge; $X ip addr add $NODE_IP/20 dev $BR; $X ip link set $BR up
# a fixed MAC: a bridge otherwise takes its lowest port's, which changes as pods come and go, and pods
# keep sending to the old one until their neighbour entry expires (tens of seconds of lost packets)
$X ip link set $BR address 02:00:c6:12:$(printf %02x $P3):01

# CNI: bridge + host-local + portmap; no masquerade, so pod source addresses survive
cat > "$D/net.d/10-spk$N.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "spk$N", "plugins": [
  {"type": "bridge", "bridge": "$BR", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$D/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON

cat > "$D/containerd.toml" <<TOML
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$D/containerd.sock"
[ttrpc]
  address = "$D/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$D/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # VMs without CAP_SYS_RESOURCE cannot set the sandbox's oom_score_adj -998 (runc fails)
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$D/net.d"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "$D/runc"
          BinaryName = "$(command -v runc)"
TOML
$X containerd --config "$D/containerd.toml" > "$D/logs/containerd.log" 2>&1 &
echo $! > "$D/containerd.pid"
waitfor "ctr -a $D/containerd.sock version"
for i in "$IMAGES"/*.tar; do ctr -a "$D/containerd.sock" -n k8s.io images import "$i" >> "$D/logs/import.log" 2>&1; done

$X etcd --name spk$N --data-dir "$D/etcd-data" \
  --listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \
  --listen-peer-urls http://127.0.0.1:$((ETCD_PORT+1)) --initial-advertise-peer-urls http://127.0.0.1:$((ETCD_PORT+1)) \
  --initial-cluster spk$N=http://127.0.0.1:$((ETCD_PORT+1)) --listen-metrics-urls http://127.0.0.1:$((ETCD_PORT+2)) \
  > "$D/logs/etcd.log" 2>&1 &
echo $! > "$D/etcd.pid"
waitfor "$X curl -sf http://127.0.0.1:$ETCD_PORT/health"
openssl genrsa -out "$D/sa.key" 2048 2>/dev/null
openssl rsa -in "$D/sa.key" -pubout -out "$D/sa.pub" 2>/dev/null
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat > "$D/tokens.csv" <<CSV
$TOKEN,admin,admin-uid,"system:masters"
node-$TOKEN,system:node:$NODE,node-uid-$N,"system:nodes"
CSV
# the aggregation layer's front proxy (so an extension API server such as metrics-server can serve
# metrics.k8s.io): a CA the API server trusts for request headers, and its client certificate
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spk$N-front-proxy-ca \
  -keyout "$D/front-proxy-ca.key" -out "$D/front-proxy-ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client \
  -keyout "$D/front-proxy-client.key" -out "$D/front-proxy-client.csr" 2>/dev/null
openssl x509 -req -in "$D/front-proxy-client.csr" -CA "$D/front-proxy-ca.crt" -CAkey "$D/front-proxy-ca.key" \
  -CAcreateserial -days 2 -out "$D/front-proxy-client.crt" 2>/dev/null
# binds all of the namespace's addresses, so the host reaches it at $VETH_NS
$X "$BIN/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:$ETCD_PORT \
  --bind-address=0.0.0.0 --advertise-address=$VETH_NS --secure-port=$API_PORT \
  --cert-dir="$D/certs" --token-auth-file="$D/tokens.csv" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-account-key-file="$D/sa.pub" --service-account-signing-key-file="$D/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range=$SVC_CIDR --endpoint-reconciler-type=none \
  --kubelet-preferred-address-types=InternalIP --allow-privileged=true \
  --requestheader-client-ca-file="$D/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- --enable-aggregator-routing=true \
  --proxy-client-cert-file="$D/front-proxy-client.crt" --proxy-client-key-file="$D/front-proxy-client.key" \
  > "$D/logs/apiserver.log" 2>&1 &
echo $! > "$D/apiserver.pid"
mkkc() {  # kubeconfig: token $1, server host $2, context spk$N
  cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: spk$N
  cluster: {server: "https://$2:$API_PORT", insecure-skip-tls-verify: true}
users:
- name: spk$N
  user: {token: $1}
contexts:
- name: spk$N
  context: {cluster: spk$N, user: spk$N}
current-context: spk$N
KC
}
mkkc "$TOKEN" "$VETH_NS" > "$D/kubeconfig"            # from the host (the controller's view)
mkkc "$TOKEN" 127.0.0.1 > "$D/kubeconfig.inside"      # for the daemons in the namespace
mkkc "node-$TOKEN" 127.0.0.1 > "$D/kubelet.kubeconfig"
waitfor "[ \"\$(curl -sk -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' https://$VETH_NS:$API_PORT/readyz)\" = 200 ]"
$X "$BIN/kube-controller-manager" --kubeconfig="$D/kubeconfig.inside" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10257 \
  --service-account-private-key-file="$D/sa.key" --root-ca-file="$D/certs/apiserver.crt" \
  --use-service-account-credentials=false --controllers='*' \
  > "$D/logs/kcm.log" 2>&1 &
echo $! > "$D/kcm.pid"
$X "$BIN/kube-scheduler" --kubeconfig="$D/kubeconfig.inside" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port=10259 > "$D/logs/scheduler.log" 2>&1 &
echo $! > "$D/scheduler.pid"

cat > "$D/kubelet-config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$D/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $CGROOT
cgroupsPerQOS: true
failSwapOn: false
podLogsDir: $D/pod-logs
makeIPTablesUtilChains: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
serializeImagePulls: false
registerNode: true
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
YAML
$X "$BIN/kubelet" --config="$D/kubelet-config.yaml" --kubeconfig="$D/kubelet.kubeconfig" \
  --hostname-override=$NODE --node-ip=$NODE_IP --root-dir="$D/kubelet" --cert-dir="$D/kubelet-pki" \
  --v=2 > "$D/logs/kubelet.log" 2>&1 &
echo $! > "$D/kubelet.pid"
$X "$BIN/kube-proxy" --kubeconfig="$D/kubeconfig.inside" --hostname-override=$NODE --proxy-mode=iptables \
  --cluster-cidr=$POD_CIDR --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256 \
  --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
  --iptables-localhost-nodeports=false > "$D/logs/kube-proxy.log" 2>&1 &
echo $! > "$D/kube-proxy.pid"
printf '#!/bin/sh\nexec %s --kubeconfig=%s "$@"\n' "$BIN/kubectl" "$D/kubeconfig" > "$K"; chmod +x "$K"
waitfor "$X curl -sk https://127.0.0.1:10257/healthz | grep -q ok && $X curl -sk https://127.0.0.1:10259/healthz | grep -q ok"
waitfor "$K get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True" 1200
waitfor "$K get sa default" 600
waitfor "$X curl -sf http://127.0.0.1:10256/healthz" 300
echo "cluster $N up in $(since $T0) s: node $NODE $NODE_IP, pods $POD_CIDR, services $SVC_CIDR, kubectl $K"
