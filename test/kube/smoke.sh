#!/bin/bash
# Smoke test of the Kubernetes harness (make test-kube): two clusters up, the spanperf agent image
# as a pod in each, a bounded rr and stream from each cluster's pod to the other's pod IP (across
# the host's routes between the pod ranges; the stream's bytes are checked against the host veth's
# counter toward the server's cluster), both clusters down, then check-clean.sh: nothing left.
# Exit 0 only if every step and the leftover check pass. KEEP=1 leaves the clusters up.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
T0=$(ts)
if [ -e "$STATE" ]; then echo "smoke: $STATE exists: clusters up already? run test/kube/down.sh first" >&2; exit 1; fi
BASE=$(mktemp); snapshot > "$BASE"
GOLOG=$(mktemp)   # the Go tests' output: a failure's own lines are printed last, after the logs
finish() {
  rc=$?
  trap '' INT TERM   # a second ^C must not cut the teardown short (children inherit this)
  if [ $rc != 0 ] && [ -d "$STATE" ]; then
    for n in 1 2; do for l in kubelet containerd; do
      [ -f "$STATE/c$n/logs/$l.log" ] && { echo "--- c$n $l.log (tail)"; tail -n 15 "$STATE/c$n/logs/$l.log"; }
    done; done >&2
    if grep -q -e '^--- FAIL' -e '^panic:' "$GOLOG"; then
      echo "--- the failing Go tests (their own lines)"
      grep -B 2 -A 25 -e '^--- FAIL' -e '^panic:' "$GOLOG" | head -n 150
    fi >&2
  fi
  [ "${KEEP:-0}" = 1 ] && { rm -f "$BASE" "$GOLOG"; exit $rc; }
  T=$(ts); "$HERE/down.sh" >/dev/null; echo "smoke: down $(since $T) s"
  "$HERE/check-clean.sh" "$BASE" || rc=1
  rm -f "$BASE" "$GOLOG"
  [ $rc = 0 ] && echo "smoke: OK in $(since $T0) s" || echo "smoke: FAILED (exit $rc)" >&2
  exit $rc
}
trap finish EXIT
"$HERE/up.sh"
T1=$(ts)
K1=$STATE/c1/kubectl; K2=$STATE/c2/kubectl
for K in "$K1" "$K2"; do sed "s#AGENT_IMAGE#$AGENT_IMAGE#" "$HERE/agent-pod.yaml" | "$K" apply -f - >/dev/null; done
for K in "$K1" "$K2"; do
  if ! "$K" wait --for=condition=Ready pod/agent --timeout=60s >/dev/null; then
    "$K" describe pod agent | tail -n 20 >&2; exit 1
  fi
done
IP1=$("$K1" get pod agent -o jsonpath='{.status.podIP}'); IP2=$("$K2" get pod agent -o jsonpath='{.status.podIP}')
echo "smoke: agent pods Ready in $(since $T1) s: spk1 $IP1, spk2 $IP2"
check() {  # $1 = JSON record of `agent client`, $2 = metric that must be > 0
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); m=r.get("metrics",{}); v=m.get(sys.argv[2],0)
assert not r.get("error") and v > 0, r.get("error") or sys.argv[2]+" missing or 0"
print("%s=%.4g p50=%s" % (sys.argv[2], v, m.get("latency_p50_s","-")))' "$1" "$2"
}
for dir in "1 $K1 $IP2" "2 $K2 $IP1"; do
  set -- $dir
  for ip in "$3"; do case "$ip" in 198.18.*) ;; *) echo "smoke: pod IP $ip outside 198.18.0.0/15" >&2; exit 1;; esac; done
  rr=$("$2" exec agent -- /spanperf agent client --mode rr --target "$3:7100" --duration 1s --request-size 64 --response-size 64)
  echo "smoke: spk$1 -> $3 rr: $(check "$rr" transactions_per_s)"
  # the stream's bytes must cross the host's route into the other cluster: its veth counts them
  other=$((3 - $1)); vtx=/sys/class/net/spkv${other}h/statistics/tx_bytes; b0=$(cat $vtx)
  st=$("$2" exec agent -- /spanperf agent client --mode stream --target "$3:7100" --duration 1s --message-size 65536)
  crossed=$(( $(cat $vtx) - b0 ))
  echo "smoke: spk$1 -> $3 stream: $(check "$st" throughput_bps), host veth spkv${other}h carried $crossed B"
  python3 -c 'import json,sys; b=json.loads(sys.argv[1])["metrics"]["bytes"]; c=int(sys.argv[2])
assert 0.9*b <= c <= 1.2*b+1e6, "stream reported %d B, host veth to the server cluster carried %d B" % (b, c)' "$st" "$crossed"
done
# The Go tests that need real clusters (they skip without these variables): the Kubernetes
# testbed, the exposure adapters and runs end to end. KUBE_GO_TESTS="" skips them.
for K in "$K1" "$K2"; do "$K" delete pod agent --wait=false >/dev/null; done
export SPANPERF_KUBECONFIG=$STATE/c1/kubeconfig:$STATE/c2/kubeconfig SPANPERF_KUBE_CONTEXTS=spk1,spk2
export SPANPERF_KUBE_IMAGE=$AGENT_IMAGE SPANPERF_KUBE_PAUSE_IMAGE=$PAUSE_IMAGE SPANPERF_KUBE_SERVER_IMAGE=${SERVER_IMAGE:-spanperf.local/server:test}
KUBE_GO_TESTS=${KUBE_GO_TESTS-$(cd "$REPO" && go list ./internal/testbed/kube/... ./internal/datapath/kubedp/... ./internal/probe/nodeprobe/... ./internal/metricsapi/... 2>/dev/null | tr '\n' ' ')}
if [ -n "$KUBE_GO_TESTS" ]; then
  T=$(ts)
  (cd "$REPO" && go test -count=1 -p 1 -timeout 15m $KUBE_GO_TESTS) 2>&1 | tee -a "$GOLOG"
  (cd "$REPO" && go test -count=1 -p 1 -timeout 5m -run 'TestPodsProbedFromMetricsAPI' ./internal/runner/) 2>&1 | tee -a "$GOLOG"
  (cd "$REPO" && go test -count=1 -p 1 -timeout 10m -run 'Kube' ./internal/cli/) 2>&1 | tee -a "$GOLOG"
  echo "smoke: Go tests against the clusters passed in $(since $T) s"
fi
