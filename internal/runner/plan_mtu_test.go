package runner_test

import (
	"testing"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
)

// TestPlanMTUGroups: a sweep of wan.mtu crossed with one of sites gives a
// group (a testbed) per (sites, MTU), each holding only its own points.
func TestPlanMTUGroups(t *testing.T) {
	s, err := scenario.Parse("p.yaml", []byte(`name: p
sites: [2, 3]
datapaths: [native]
wan: {mtu: [1500, 9000]}
workloads:
  - type: rr
    concurrency: [1, 2]
repetitions: 2
`), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	groups := runner.Plan(s, 1)
	if len(groups) != 2*4 {
		t.Fatalf("%d groups, want 2 reps × 2 sites × 2 MTUs", len(groups))
	}
	seen := map[[3]int]bool{}
	for _, g := range groups {
		if g.MTU != 1500 && g.MTU != 9000 {
			t.Errorf("group MTU %d", g.MTU)
		}
		seen[[3]int{g.Rep, g.Sites, g.MTU}] = true
		if len(g.Trials) != 2 {
			t.Errorf("group %+v: %d trials, want 2", g, len(g.Trials))
		}
		for _, tr := range g.Trials {
			if tr.Point.Params[results.WANMTUParam] != int64(g.MTU) || tr.Point.Params[scenario.SitesParam] != int64(g.Sites) {
				t.Errorf("group sites=%d MTU %d holds point %v", g.Sites, g.MTU, tr.Point.Params)
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d distinct groups, want 8", len(seen))
	}
}
