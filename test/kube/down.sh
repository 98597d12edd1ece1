#!/bin/bash
# Tears down both test clusters and everything up.sh made: the clusters (cluster-down.sh), the
# shim sockets and dirs containerd and CNI leave outside their roots
# (/run/containerd/s, /var/lib/cni), host ip_forward (restored), and $STATE.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
T0=$(ts)
"$HERE/cluster-down.sh" 2 & "$HERE/cluster-down.sh" 1; wait
if [ -f "$STATE/baseline" ]; then
  for s in $(ls /run/containerd/s 2>/dev/null); do grep -qx "sock:$s" "$STATE/baseline" || rm -f "/run/containerd/s/$s"; done
  for d in $OUTSIDE_DIRS; do grep -qx "dir:$d" "$STATE/baseline" || rmdir "$d" 2>/dev/null; done
fi
[ -f "$STATE/ip_forward" ] && sysctl -qw net.ipv4.ip_forward="$(cat "$STATE/ip_forward")"
rm -rf "$STATE"
echo "down in $(since $T0) s"
