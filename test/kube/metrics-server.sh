#!/bin/bash
# metrics-server on test cluster N, so that the metrics API (metrics.k8s.io) serves pods' CPU.
#   up N    builds metrics-server v0.9.0 (static, from the module proxy, cached outside the clone
#           in $SPANPERF_KUBE_CACHE/metrics-server-v0.9.0, default /var/cache/spanperf/kube),
#           images it (`spanperf image --binary`, tag spanperf.local/metrics-server:v0.9.0),
#           imports it into cluster N's containerd, applies metrics-server/metrics-server.yaml and
#           waits (at most $MS_WAIT s, default 150) until the API serves a PodMetrics (its own),
#           printing how long that took.
#   down N  deletes what up applied (waiting until its pod is gone) and the image from containerd.
# No fetched code is committed: the build runs in the module's own go.mod (`go install pkg@v`).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
usage() { echo "usage: metrics-server.sh up|down N" >&2; exit 2; }
[ $# = 2 ] || usage
VERB=$1; cluster_vars "$2"
V=v0.9.0
MS_IMAGE=spanperf.local/metrics-server:$V
MANIFEST=$HERE/metrics-server/metrics-server.yaml
PORT=10251   # on the node's network; the API server's aggregator dials node IP:PORT (aggregator routing)
[ -x "$K" ] || { echo "metrics-server: cluster $N is not up ($K missing)" >&2; exit 1; }
render() { sed -e "s|@IMAGE@|$MS_IMAGE|" -e "s|@API_HOST@|$VETH_NS|" -e "s|@PORT@|$PORT|" "$MANIFEST"; }

build() {  # prints the static binary's path, building it when the cache is cold
  local cache=${SPANPERF_KUBE_CACHE:-/var/cache/spanperf/kube}/metrics-server-$V ldf="-s -w" stamp tmp t0
  stamp=$( { echo "$V $ldf"; go version; } | sha256sum | cut -c1-16)
  if [ "$(cat "$cache/stamp" 2>/dev/null)" = "$stamp" ] && [ -x "$cache/bin/metrics-server" ]; then
    echo "$cache/bin/metrics-server"; return
  fi
  mkdir -p "$cache"; tmp=$(mktemp -d "$cache/build.XXXXXX"); t0=$(ts)
  echo "metrics-server $V: building (cold: about 2 min with the download)" >&2
  if ! (cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="-trimpath -buildvcs=false" \
        go install -ldflags "$ldf" "sigs.k8s.io/metrics-server/cmd/metrics-server@$V") >&2; then
    rm -rf "$tmp"; return 1
  fi
  chmod 755 "$tmp"; rm -rf "$cache/bin"; mv "$tmp" "$cache/bin"; echo "$stamp" > "$cache/stamp"
  echo "metrics-server $V: built in $(since "$t0") s" >&2
  echo "$cache/bin/metrics-server"
}

case $VERB in
up)
  T0=$(ts)
  BIN_MS=$(build)
  SPANPERF=$REPO/bin/spanperf-static
  if [ ! -x "$SPANPERF" ]; then
    SPANPERF=$(mktemp -d)/spanperf; trap 'rm -rf "$(dirname "$SPANPERF")"' EXIT
    CGO_ENABLED=0 go build -C "$REPO" -trimpath -o "$SPANPERF" ./cmd/spanperf
  fi
  mkdir -p "$IMAGES"
  "$SPANPERF" image --binary "$BIN_MS" --tag "$MS_IMAGE" -o "$IMAGES/metrics-server.tar" >/dev/null
  ctr -a "$D/containerd.sock" -n k8s.io images import "$IMAGES/metrics-server.tar" >/dev/null
  T1=$(ts)
  render | $K apply -f - >/dev/null
  # Ready pod, then the APIService Available, then a PodMetrics served (metrics-server needs two
  # scrapes of a pod, one resolution apart, before it has a rate).
  deadline=$((SECONDS + ${MS_WAIT:-150}))
  until pod=$($K -n kube-system get pods -l k8s-app=metrics-server \
                -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}' 2>/dev/null | head -1) \
        && [ -n "$pod" ] \
        && $K get --raw "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods/$pod" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "metrics-server: cluster $N: no PodMetrics served within ${MS_WAIT:-150} s; last:" >&2
      $K -n kube-system get pods -l k8s-app=metrics-server -o wide >&2 || true
      $K get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[*].message}{"\n"}' >&2 || true
      $K -n kube-system logs -l k8s-app=metrics-server --tail 20 >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  echo "metrics-server on cluster $N: image $(printf '%.1f' "$(echo "$T1 - $T0" | bc)") s; first PodMetrics $(since "$T1") s after apply"
  ;;
down)
  render | $K delete --ignore-not-found --wait=true --timeout=60s -f - >/dev/null
  deadline=$((SECONDS + 60))
  while $K -n kube-system get pods -l k8s-app=metrics-server -o name 2>/dev/null | grep -q .; do
    [ $SECONDS -lt $deadline ] || { echo "metrics-server: cluster $N: pod not gone in 60 s" >&2; exit 1; }
    sleep 0.5
  done
  ctr -a "$D/containerd.sock" -n k8s.io images rm "$MS_IMAGE" >/dev/null 2>&1 || true
  rm -f "$IMAGES/metrics-server.tar"
  echo "metrics-server removed from cluster $N"
  ;;
*) usage ;;
esac
