package report

import (
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// latency_samples is a count, not a latency: fewer samples is no
// regression of its own, so compare gives it no direction; the tail
// percentiles keep theirs, and more late requests is worse.
func TestLatencySamplesHasNoDirection(t *testing.T) {
	for m, want := range map[string]Direction{
		results.LatencySamples: Neutral,
		results.LatencyP999:    LowerIsBetter,
		results.LatencyP9999:   LowerIsBetter,
		results.Late:           LowerIsBetter,
	} {
		if got := MetricDirection(m); got != want {
			t.Errorf("MetricDirection(%s) = %v, want %v", m, got, want)
		}
	}
}
