package cli_test

import (
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestTunnelUpKnownAnswer: a custom datapath whose relay listens a known
// 300 ms after its up command starts (its setup returns as soon as another
// listener is up) reads tunnel_up_s 300 ms to 330 ms: never less than the
// injected delay, and above it only by starting sh and socat and the
// probe's 1 ms interval.
func TestTunnelUpKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: tunnel-up
datapaths:
  - name: custom
    label: late
    up: "socat TCP-LISTEN:17101,bind=$SPANPERF_SITE_ADDR,reuseaddr,fork SYSTEM:true & sleep 0.3; exec socat TCP-LISTEN:17100,bind=$SPANPERF_SITE_ADDR,reuseaddr,fork TCP:$SPANPERF_PEER_ADDR:$SPANPERF_PORT"
    ready: "{site_addr}:17101"
    target: "{site_addr}:17100"
workloads:
  - type: tunnel-up
repetitions: 5
`)
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	up := medianOf(t, recs, "interval", "1ms", results.TunnelUpSeconds)
	setup := medianOf(t, recs, "interval", "1ms", results.SetupSeconds)
	t.Logf("setup %.1f ms, tunnel up %.1f ms, teardown %.1f ms", setup*1e3, up*1e3, medianOf(t, recs, "interval", "1ms", results.TeardownSeconds)*1e3)
	if up < 0.300 || up > 0.330 {
		t.Errorf("tunnel_up_s %.1f ms, want 300 to 330 ms (the relay listens 300 ms after up starts)", up*1e3)
	}
	if setup >= up {
		t.Errorf("setup %.1f ms ≥ tunnel up %.1f ms: setup should return once 17101 listens", setup*1e3, up*1e3)
	}
}

// TestTunnelUpEveryDatapath: every local datapath that runs here comes up
// and carries a transaction; tunnel-up is never shorter than the setup
// that precedes the probe; an rr beside it in the same scenario runs on
// the group's own datapath afterwards.
func TestTunnelUpEveryDatapath(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: tunnel-up-all
datapaths: [native, vxlan, wireguard, ipsec, mtls-relay, mesh-gateway]
workloads:
  - type: tunnel-up
  - type: rr
repetitions: 1
duration: 500ms
warmup: 100ms
`)
	for _, r := range recs {
		if r.Workload == "rr" {
			if r.Metrics[results.TransactionsPerS] <= 0 {
				t.Errorf("%s: rr beside tunnel-up: %v transactions/s", r.Datapath, r.Metrics[results.TransactionsPerS])
			}
			continue
		}
		up, setup := r.Metrics[results.TunnelUpSeconds], r.Metrics[results.SetupSeconds]
		t.Logf("%-12s setup %7.1f ms  tunnel up %7.1f ms  teardown %6.1f ms  attempts %v", r.Datapath, setup*1e3, up*1e3, r.Metrics[results.TeardownSeconds]*1e3, r.Metrics[results.ProbeAttempts])
		if up < setup || up <= 0 || r.Metrics[results.ProbeAttempts] < 1 {
			t.Errorf("%s: tunnel up %.4f s, setup %.4f s", r.Datapath, up, setup)
		}
	}
}
