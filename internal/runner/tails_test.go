package runner_test

import (
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
)

// A real rr trial paced at 300/s for 1 s takes about 300 latencies: its
// record carries the count, and its p99.9 and p99.99 are missing with the
// count as the reason, not reported from the three slowest samples.
func TestRunWithholdsThinTails(t *testing.T) {
	datapathtest.RequireRoot(t)
	src := `name: tails
datapaths: [native]
workloads:
  - type: rr
    rate: 300
repetitions: 1
duration: 1s
warmup: 200ms
`
	recs := runRecords(t, src)
	if len(recs) != 1 || recs[0].Error != "" {
		t.Fatalf("records %+v, want one that succeeded", recs)
	}
	r := recs[0]
	n := r.Metrics[results.LatencySamples]
	t.Logf("samples %g, missing %v", n, r.Missing)
	if n < 270 || n > 330 {
		t.Errorf("latency_samples %g, want 300 ± 10%%", n)
	}
	for _, k := range []string{results.LatencyP999, results.LatencyP9999} {
		if _, ok := r.Metrics[k]; ok {
			t.Errorf("%s reported from %g samples", k, n)
		}
		if why := r.Missing[k]; !strings.Contains(why, "samples, needs ≥") {
			t.Errorf("missing[%s] = %q, want the sample count and the need", k, why)
		}
	}
	if _, ok := r.Metrics[results.LatencyP99]; !ok {
		t.Error("no latency_p99_s")
	}
}
