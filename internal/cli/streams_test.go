package cli_test

import (
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// TestStream512OverWAN: 512 streams over an 80 ms round trip connect in
// parallel: one at a time they took 41 s and the trial timed out (its
// limit is duration + warmup + 30 s). The run, with two 1.5 s trials,
// takes well under a minute, and every stream is counted.
func TestStream512OverWAN(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	recs, _ := runWAN(t, `name: streams-512
datapaths: [native]
wan: {delay: 40ms, emulator: userspace}
workloads:
  - type: stream
    streams: 512
repetitions: 2
duration: 1s
warmup: 500ms
`)
	took := time.Since(start)
	t.Logf("run took %v", took.Round(time.Millisecond))
	for _, r := range recs {
		if r.Metrics[results.ThroughputBPS] <= 0 {
			t.Errorf("rep %d: throughput %v", r.Rep, r.Metrics[results.ThroughputBPS])
		}
	}
	if took > 45*time.Second {
		t.Errorf("run took %v: 512 streams did not connect in parallel", took)
	}
}
