# Shared settings of the Kubernetes test harness (sourced by the scripts here).
# Every address is inside 198.18.0.0/15 (RFC 2544, benchmarking); never a private range.
# Cluster N (1, 2) runs all its daemons in network namespace spk$N, linked to the host by
# veth spkv${N}h (198.18.250.(4N+1)/30) <-> spkv${N}n (198.18.250.(4N+2)/30); the host
# routes each cluster's pod CIDR to its veth, so pods reach the other cluster by pod IP.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${SPANPERF_KUBE_STATE:-/var/tmp/spanperf-kube}      # removed by down.sh
IMAGES=$STATE/images
AGENT_IMAGE=${AGENT_IMAGE:-spanperf.local/spanperf:dev}
PAUSE_IMAGE=spanperf.local/pause:1
export PATH=$PATH:/usr/local/go/bin
ts() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(ts) - $1" | bc)"; }
cluster_vars() {  # sets the per-cluster names and addresses of cluster $1
  N=$1; D=$STATE/c$N; NS=spk$N; X="nsenter --net=/run/netns/$NS"
  P3=$((128 + 16 * (N - 1))); POD_CIDR=198.18.$P3.0/20; NODE_IP=198.18.$P3.1
  SVC_CIDR=198.18.$((240 + N)).0/24; BR=spkbr$N; NODE=spk-node$N; CGROOT=/spkube$N
  VETH_HOST=198.18.250.$((4 * N + 1)); VETH_NS=198.18.250.$((4 * N + 2))
  ETCD_PORT=2379; API_PORT=6443; KUBELET_PORT=10250
  K=$D/kubectl
}
# Dirs containerd and CNI make outside their configured roots: down.sh removes those the
# clusters created (empty ones); snapshot() lists what exists, for check-clean.sh.
OUTSIDE_DIRS="/run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni"
snapshot() {  # netns names, "dir:D" for each existing OUTSIDE_DIRS entry, "sock:S" in /run/containerd/s
  ip netns list 2>/dev/null | awk '{print $1}'
  for d in $OUTSIDE_DIRS; do [ -d "$d" ] && echo "dir:$d"; done
  { ls /run/containerd/s 2>/dev/null || true; } | sed 's/^/sock:/'
  true
}
# cgroup_dirs NAME: the cgroup directories named NAME at the top of every hierarchy (v1: one per
# controller; v2: one); cgroup_pids NAME: the processes in them or below.
cgroup_dirs() { local h; for h in /sys/fs/cgroup/$1 /sys/fs/cgroup/*/$1; do [ -d "$h" ] && echo "$h"; done; true; }
cgroup_pids() { local d; for d in $(cgroup_dirs "$1"); do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u; }
