// Package runner plans a scenario's trials and runs them: a fresh testbed
// and datapath for each (repetition, datapath) group, every trial recorded as
// it ends.
package runner

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// Trial is one datapath × workload point × repetition.
type Trial struct {
	// Index is the trial's position in the plan, from 0.
	Index int
	// Rep is the repetition, from 0.
	Rep int
	// Datapath is the datapath entry.
	Datapath scenario.DatapathSpec
	// Point is the workload and its parameters.
	Point scenario.Point
}

// Key identifies the trial in records (see results.TrialKey).
func (t Trial) Key() string {
	return results.TrialKey(t.Datapath.Label, t.Point.Workload, t.Point.Params, t.Rep)
}

// Group is the trials that share one testbed: one datapath in one repetition.
type Group struct {
	Rep      int
	Datapath scenario.DatapathSpec
	// Sites is the group's number of sites when the scenario sweeps it
	// (scenario.SitesParam); 0 means the scenario's.
	Sites int
	// MTU is the group's underlay MTU when the scenario sweeps it
	// (results.WANMTUParam); 0 means the scenario's.
	MTU    int
	Trials []Trial
}

// Plan orders every trial of s: each datapath runs its own points
// (scenario.PointsOf: a limit multiplies only the points of the datapaths it
// names). Repetitions run in order; within each, the
// datapaths and, within each datapath, the workload points are shuffled with
// seed. On Kubernetes sites a datapath's points are then kept together by
// their limits (the limit values in the shuffled order of their first
// point), since each change of a limit there is a rollout of the
// component's pods. Datapaths thus interleave across repetitions, so slow drift of a
// shared machine does not bias one datapath. The same s and seed give the
// same plan (resume relies on it).
func Plan(s *scenario.Scenario, seed int64) []Group {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5ba7))
	points := map[string][]scenario.Point{}
	for _, d := range s.Datapaths {
		// A workload the datapath cannot run (discovery without a way to
		// expose) is left out; Run says so.
		for _, pt := range s.PointsOf(d.Label) {
			if s.Incapable(plugins.Catalog{}, d.Label, pt.Workload) == nil {
				points[d.Label] = append(points[d.Label], pt)
			}
		}
	}
	var groups []Group
	idx := 0
	for rep := 0; rep < s.Repetitions; rep++ {
		dps := append([]scenario.DatapathSpec(nil), s.Datapaths...)
		rng.Shuffle(len(dps), func(i, j int) { dps[i], dps[j] = dps[j], dps[i] })
		for _, dp := range dps {
			pts := points[dp.Label]
			order := rng.Perm(len(pts))
			if s.IsKube() {
				order = byLimits(pts, order)
			}
			// A sweep of the number of sites gives each count a testbed
			// of its own: a group per count, in the order of its first
			// point.
			var sub []Group
			for _, pi := range order {
				n, mtu := 0, 0
				if v, ok := pts[pi].Params[scenario.SitesParam].(int64); ok {
					n = int(v)
				}
				if v, ok := pts[pi].Params[results.WANMTUParam].(int64); ok {
					mtu = int(v) // so does a sweep of the MTU
				}
				k := slices.IndexFunc(sub, func(g Group) bool { return g.Sites == n && g.MTU == mtu })
				if k < 0 {
					sub = append(sub, Group{Rep: rep, Datapath: dp, Sites: n, MTU: mtu})
					k = len(sub) - 1
				}
				sub[k].Trials = append(sub[k].Trials, Trial{Rep: rep, Datapath: dp, Point: pts[pi]})
			}
			for _, g := range sub {
				for i := range g.Trials {
					g.Trials[i].Index = idx
					idx++
				}
				groups = append(groups, g)
			}
		}
	}
	return groups
}

// byLimits reorders order (indexes of pts) so that points with the same
// CPU limits are adjacent, keeping the order within each and ordering the
// limit values by their first point in order.
func byLimits(pts []scenario.Point, order []int) []int {
	key := func(p scenario.Point) string {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(p.Params)) {
			if _, ok := results.ParseCPULimitParam(name); ok {
				parts = append(parts, fmt.Sprintf("%s=%v", name, p.Params[name]))
			}
		}
		return strings.Join(parts, ",")
	}
	rank := map[string]int{}
	for _, i := range order {
		if _, ok := rank[key(pts[i])]; !ok {
			rank[key(pts[i])] = len(rank)
		}
	}
	out := slices.Clone(order)
	slices.SortStableFunc(out, func(a, b int) int { return rank[key(pts[a])] - rank[key(pts[b])] })
	return out
}
