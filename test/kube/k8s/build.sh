#!/bin/bash
# Builds the Kubernetes binaries the harness runs (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, kubectl) from the k8s.io/kubernetes module (go.mod here)
# into a cache outside the clone, keyed by version: $SPANPERF_KUBE_CACHE/<version>/bin
# (default /var/cache/spanperf/kube). A warm cache (a stamp that matches go.mod, go.sum and the
# flags) makes this a no-op. Prints the bin directory on its last line.
set -euo pipefail
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/go/bin
V=v1.33.13
CACHE=${SPANPERF_KUBE_CACHE:-/var/cache/spanperf/kube}/$V
BINS="kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl kube-proxy"
LDF="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=33 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$V -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=33"
STAMP=$( { cat go.mod go.sum; echo "$LDF $BINS"; go version; } | sha256sum | cut -c1-16)
if [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$STAMP" ]; then
  ok=1; for b in $BINS; do [ -x "$CACHE/bin/$b" ] || ok=0; done
  if [ $ok = 1 ]; then echo "kubernetes $V: cached"; echo "$CACHE/bin"; exit 0; fi
fi
mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pk=(); for t in $BINS; do pk+=("k8s.io/kubernetes/cmd/$t"); done
T0=$(date +%s)
echo "kubernetes $V: building ${BINS// /, } (cold: several minutes, ~2 GB memory)" >&2
CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "$LDF" -o "$TMP/" "${pk[@]}"
chmod 755 "$TMP"; rm -rf "$CACHE/bin"; mv "$TMP" "$CACHE/bin"; trap - EXIT
echo "$STAMP" > "$CACHE/stamp"
echo "kubernetes $V: built in $(( $(date +%s) - T0 )) s" >&2
echo "$CACHE/bin"
