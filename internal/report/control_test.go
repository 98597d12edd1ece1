package report

import (
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestControlDirection: discovery's and failover's times and failed
// transactions are lower-is-better; the per-site answer counts and the
// failure's injection time have no direction.
func TestControlDirection(t *testing.T) {
	for m, want := range map[string]Direction{
		results.DiscoverySeconds:      LowerIsBetter,
		results.RouteInstalledSeconds: LowerIsBetter,
		results.FirstResponseSeconds:  LowerIsBetter,
		results.OutageSeconds:         LowerIsBetter,
		results.RecoverySeconds:       LowerIsBetter,
		results.FailedTransactions:    LowerIsBetter,
		results.AnsweredBy + "{c}":    Neutral,
		results.FailedAfterSeconds:    Neutral,
	} {
		if got := MetricDirection(m); got != want {
			t.Errorf("MetricDirection(%s) = %v, want %v", m, got, want)
		}
	}
}
