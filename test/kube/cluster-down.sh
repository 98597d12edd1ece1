#!/bin/bash
# Tears down cluster N started by cluster-up.sh: pods through the API first (so kubelet and CRI
# run CNI DEL and unmount), then the recorded daemons, the shims bound to this containerd, mounts
# under its state, the pods' netns, the namespace spk$N (its veth, bridge and KUBE-* chains go
# with it), the host route, the cgroups, and the state directory. Kills only recorded PIDs and
# shims started for this cluster's socket. Safe to run twice or on a half-started cluster.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cluster_vars "${1:?usage: cluster-down.sh N}"
alive() { [ -f "$D/$1.pid" ] && kill -0 "$(cat "$D/$1.pid")" 2>/dev/null; }
stop() {  # stop the recorded daemons "$@" together; any still there after 5 s gets SIGKILL
  local d p ps=() n=0
  for d in "$@"; do
    [ -f "$D/$d.pid" ] || continue; p=$(cat "$D/$d.pid"); rm -f "$D/$d.pid"
    kill "$p" 2>/dev/null && ps+=("$p")
  done
  while [ $n -lt 50 ]; do
    local any=0; for p in "${ps[@]}"; do kill -0 "$p" 2>/dev/null && any=1; done
    [ $any = 0 ] && return 0; sleep 0.1; n=$((n+1))
  done
  for p in "${ps[@]}"; do kill -9 "$p" 2>/dev/null; done; return 0
}
T0=$(ts); PH=""; phase() { PH="$PH $1 $(since $T0)"; }
stop kcm scheduler   # first, so no controller recreates the pods deleted next
if alive apiserver && alive kubelet; then
  "$K" delete pods --all -A --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1
fi
phase pods
stop kube-proxy kubelet apiserver etcd
phase daemons
if alive containerd; then  # leftover sandboxes: remember their netns, kill their tasks
  for c in $(ctr -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr -a "$D/containerd.sock" -n k8s.io containers info "$c" 2>/dev/null | grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"' | xargs -rn1 basename
  done > "$D/leftover-netns.txt"
  for t in $(ctr -a "$D/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$D/containerd.sock" -n k8s.io tasks kill -s KILL "$t" 2>/dev/null; done
  sleep 1
fi
# shims started for this containerd (named by their -address argument), then containerd itself
for p in $(ls /proc | grep -E '^[0-9]+$'); do
  if { tr '\0' ' ' < /proc/$p/cmdline; } 2>/dev/null | grep -q "containerd-shim.* -address $D/containerd.sock"; then kill -9 "$p" 2>/dev/null; fi
done
stop containerd
LEFT_NS=$(cat "$D/leftover-netns.txt" 2>/dev/null)
# backstop: whatever still runs in this cluster's cgroups is one of its containers (its shim
# killed, its pod never deleted, e.g. after a kill -9 of the harness): note its netns, kill it
for p in $(cgroup_pids "${CGROOT#/}"); do
  LEFT_NS+=" $(ip netns identify "$p" 2>/dev/null | grep '^cni-')"
  kill -9 "$p" 2>/dev/null
done
sleep 0.2
phase containerd
for m in $(awk '{print $5}' /proc/self/mountinfo | grep "^$D/" | sort -r); do umount -l "$m" 2>/dev/null; done
for ns in $(echo $LEFT_NS | tr " " "\n" | sort -u); do ip netns del "$ns" 2>/dev/null; done
rm -f /var/lib/cni/results/spk$N-*
ip route del $POD_CIDR 2>/dev/null
ip netns del $NS 2>/dev/null   # the veth pair, the bridge and the namespace's iptables go with it
for h in $(cgroup_dirs "${CGROOT#/}"); do find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null; done
rm -rf "$D"
phase rest
echo "cluster $N down (cumulative s):$PH"
true
