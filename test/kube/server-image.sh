#!/bin/bash
# Builds the test server image (nginx and PostgreSQL 15 from this host's Debian packages,
# no shell; test/kube/serverimage) as $OUT (default bin/server.tar), tag $SERVER_IMAGE
# (default spanperf.local/server:test), and with --import loads it into the containerd
# of each running cluster. up.sh calls it before cluster-up.sh with OUT=$IMAGES/server.tar,
# so cluster-up.sh imports it with the others.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SERVER_IMAGE=${SERVER_IMAGE:-spanperf.local/server:test}
OUT=${OUT:-$REPO/bin/server.tar}
for p in /usr/sbin/nginx /usr/lib/postgresql/15/bin/postgres /usr/lib/postgresql/15/bin/pgbench; do
  [ -x "$p" ] || { echo "server-image.sh: $p missing (scripts/deps.sh installs nginx and postgresql)" >&2; exit 1; }
done
(cd "$REPO" && go run ./test/kube/serverimage -o "$OUT" -tag "$SERVER_IMAGE")
if [ "${1:-}" = --import ]; then
  for N in 1 2; do
    cluster_vars "$N"
    [ -S "$D/containerd.sock" ] || continue
    ctr -a "$D/containerd.sock" -n k8s.io images import "$OUT" >/dev/null
    echo "imported $SERVER_IMAGE into cluster $N"
  done
fi
