package runner_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
)

func TestPlanInterleavesAndIsDeterministic(t *testing.T) {
	s, err := scenario.Parse("p.yaml", []byte(`name: p
datapaths: [native, vxlan, wireguard]
workloads:
  - type: stream
    message_size: [1024, 65536]
  - type: rr
repetitions: 4
`), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := runner.Plan(s, 42), runner.Plan(s, 42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different plans")
	}
	if reflect.DeepEqual(a, runner.Plan(s, 43)) {
		t.Error("different seeds, same plan")
	}
	if len(a) != 12 { // 4 reps × 3 datapaths
		t.Fatalf("%d groups, want 12", len(a))
	}
	idx, keys := 0, map[string]bool{}
	firstOrder := ""
	sameOrder := true
	for i, g := range a {
		if g.Rep != i/3 {
			t.Errorf("group %d is rep %d: repetitions must run in order", i, g.Rep)
		}
		if len(g.Trials) != 3 {
			t.Errorf("group %d has %d trials, want 3 points", i, len(g.Trials))
		}
		for _, tr := range g.Trials {
			if tr.Index != idx || tr.Rep != g.Rep || tr.Datapath.Label != g.Datapath.Label {
				t.Errorf("trial %+v out of place in group %d", tr, i)
			}
			idx++
			if keys[tr.Key()] {
				t.Errorf("trial %s planned twice", tr.Key())
			}
			keys[tr.Key()] = true
		}
		if i%3 == 2 { // each rep runs every datapath once
			seen := map[string]bool{a[i-2].Datapath.Label: true, a[i-1].Datapath.Label: true, g.Datapath.Label: true}
			if len(seen) != 3 {
				t.Errorf("rep %d does not run each datapath once: %v", g.Rep, seen)
			}
			order := a[i-2].Datapath.Label + a[i-1].Datapath.Label + g.Datapath.Label
			if firstOrder == "" {
				firstOrder = order
			} else if order != firstOrder {
				sameOrder = false
			}
		}
	}
	if len(keys) != 36 {
		t.Errorf("%d distinct trials, want 36", len(keys))
	}
	if sameOrder {
		t.Error("the datapath order is the same in every repetition: not shuffled")
	}
}

// TestPlanLimitsOnlyTheirDatapaths: a relay limit multiplies only the
// relay's points; the native baseline beside it runs each point once, with
// no limit parameter (before, it ran every limit value and failed each).
func TestPlanLimitsOnlyTheirDatapaths(t *testing.T) {
	s, err := scenario.Parse("p.yaml", []byte(`name: p
datapaths: [native, mtls-relay]
limits: {relay: {cpu: [0.5, 1, 2]}}
workloads:
  - {type: rr, rate: [1000, 2000]}
repetitions: 2
`), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, g := range runner.Plan(s, 1) {
		for _, tr := range g.Trials {
			n[tr.Datapath.Label]++
			_, limited := tr.Point.Params["limit.relay.cpu"]
			if limited != (tr.Datapath.Label == "mtls-relay") {
				t.Errorf("trial %s: limited %v", tr.Key(), limited)
			}
		}
	}
	if n["native"] != 2*2 || n["mtls-relay"] != 2*2*3 {
		t.Errorf("trials per datapath %v, want native 4, mtls-relay 12", n)
	}
}

// TestPlanKubeGroupsLimits: on Kubernetes sites each limit value's trials
// are adjacent in a group (each change of a limit there is a rollout),
// while the points within a value and the order of the values still
// shuffle with the seed; local runs keep the plain shuffle.
func TestPlanKubeGroupsLimits(t *testing.T) {
	s, err := scenario.Parse("p.yaml", []byte(`name: p
sites: [{name: east, context: east}, {name: west, context: west}]
allow_patch: true
datapaths:
  - name: k8s-custom
    target: "{server_node_ip}:18123"
    components: [{name: relay, site: west, namespace: user, selector: app=relay}]
workloads:
  - type: stream
    message_size: [1024, 4096, 65536]
  - type: rr
limits:
  relay: {cpu: [0.1, 0.2, 0.3]}
repetitions: 3
`), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	firsts := map[string]bool{}
	for seed := int64(1); seed <= 6; seed++ {
		groups := runner.Plan(s, seed)
		idx := 0
		for _, g := range groups {
			if len(g.Trials) != 12 {
				t.Fatalf("seed %d: group of %d trials, want 12", seed, len(g.Trials))
			}
			var order []any
			for _, tr := range g.Trials {
				if tr.Index != idx {
					t.Errorf("seed %d: trial %d has index %d", seed, idx, tr.Index)
				}
				idx++
				v := tr.Point.Params["limit.relay.cpu"]
				if len(order) == 0 || order[len(order)-1] != v {
					order = append(order, v)
				}
			}
			if len(order) != 3 {
				t.Errorf("seed %d rep %d: limits in order %v, want each value's trials together", seed, g.Rep, order)
			}
			firsts[fmt.Sprint(order[0])] = true
		}
	}
	if len(firsts) < 2 {
		t.Errorf("the first limit value is always %v: the values' order should shuffle", firsts)
	}
}
