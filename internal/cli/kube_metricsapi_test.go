package cli_test

import (
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestKubeRunWithoutProbe runs rr across the two clusters through k8s-pod
// with neither probe: node nor prometheus:, so the runner looks for the
// metrics API (test/kube/metrics-server.sh serves it) and reads it during
// each trial's window. k8s-pod has no component pods, so what the run can
// show is the path through: every trial succeeds, the datapath's CPU is
// missing saying it has no pods, the node figures say probe: node would
// give them, and no namespace is left. (The metrics API's figure for a
// component pod is TestPodsProbedFromMetricsAPI's, in internal/runner: no
// adapter with component pods can run on the local clusters.)
func TestKubeRunWithoutProbe(t *testing.T) {
	recs, _ := runKubeScenario(t, "name: kube-noprobe\nsites:\n  - {name: east, context: %s}\n  - {name: west, context: %s}\ndatapaths: [k8s-pod]\nworkloads: [{type: rr}]\nrepetitions: 2\nduration: 2s\nwarmup: 300ms\n")
	if len(recs) != 2 {
		t.Errorf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.TrialKey(), r.Error)
			continue
		}
		if v := r.Metrics[results.TransactionsPerS]; !(v > 0) {
			t.Errorf("%s: %s = %v", r.TrialKey(), results.TransactionsPerS, v)
		}
		if why := r.Missing[results.CPUCoresDatapath]; !strings.Contains(why, "no pods") {
			t.Errorf("%s: missing[%s] = %q, want the datapath has no pods", r.TrialKey(), results.CPUCoresDatapath, why)
		}
		if why := r.Missing[results.CPUCoresBusy]; !strings.Contains(why, "probe: node") {
			t.Errorf("%s: missing[%s] = %q, want it naming probe: node", r.TrialKey(), results.CPUCoresBusy, why)
		}
	}
}
