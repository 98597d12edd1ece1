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
stop() {  # stop the recorded daemon $1 and wait up to 5 s for it to go
  local f=$D/$1.pid p n=0; [ -f "$f" ] || return 0; p=$(cat "$f")
  if kill "$p" 2>/dev/null; then
    while kill -0 "$p" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
  fi
  rm -f "$f"
}
stop kcm; stop scheduler   # first, so no controller recreates the pods deleted next
if alive apiserver && alive kubelet; then
  "$K" delete pods --all -A --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1
fi
stop kube-proxy; stop kubelet; stop apiserver; stop etcd
if alive containerd; then  # leftover sandboxes: remember their netns, kill their tasks
  for c in $(ctr -a "$D/containerd.sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr -a "$D/containerd.sock" -n k8s.io containers info "$c" 2>/dev/null | grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"' | xargs -rn1 basename
  done | sort -u > "$D/leftover-netns.txt"
  for t in $(ctr -a "$D/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$D/containerd.sock" -n k8s.io tasks kill -s KILL "$t" 2>/dev/null; done
  sleep 1
fi
# shims started for this containerd (named by their -address argument), then containerd itself
for p in $(ls /proc | grep -E '^[0-9]+$'); do
  if { tr '\0' ' ' < /proc/$p/cmdline; } 2>/dev/null | grep -q "containerd-shim.* -address $D/containerd.sock"; then kill -9 "$p" 2>/dev/null; fi
done
stop containerd
for m in $(awk '{print $5}' /proc/self/mountinfo | grep "^$D/" | sort -r); do umount -l "$m" 2>/dev/null; done
for ns in $(cat "$D/leftover-netns.txt" 2>/dev/null); do ip netns del "$ns" 2>/dev/null; done
rm -f /var/lib/cni/results/spk$N-*
ip route del $POD_CIDR 2>/dev/null
ip netns del $NS 2>/dev/null   # the veth pair, the bridge and the namespace's iptables go with it
for h in /sys/fs/cgroup/*/${CGROOT#/}; do [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null; done
rm -rf "$D"
true
