#!/bin/bash
# Tears down both test clusters and everything up.sh made: the clusters (cluster-down.sh), the
# shim sockets containerd leaves in /run/containerd/s, host ip_forward (restored), and $STATE.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
T0=$(ts)
"$HERE/cluster-down.sh" 2; "$HERE/cluster-down.sh" 1
if [ -f "$STATE/baseline-containerd-s" ]; then
  for s in $(ls /run/containerd/s 2>/dev/null); do grep -qx "$s" "$STATE/baseline-containerd-s" || rm -f "/run/containerd/s/$s"; done
fi
[ -f "$STATE/ip_forward" ] && sysctl -qw net.ipv4.ip_forward="$(cat "$STATE/ip_forward")"
rm -rf "$STATE"
echo "down in $(since $T0) s"
