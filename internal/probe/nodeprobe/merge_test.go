package nodeprobe

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// Known answers of Merge on four nodes' results (testdata/merge-nodes.json):
// spk-node1 and spk-node2 share one kernel (boot b00t-1: the two local
// clusters on one machine), far-node has its own, dead-node's probe failed.
func TestMergeFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/merge-nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	var nodes []Result
	if err := json.Unmarshal(b, &nodes); err != nil {
		t.Fatal(err)
	}
	comps := []results.Component{
		{Name: "router@east", Node: "spk-node1", PodUID: "u1"},
		{Name: "gw@west", Node: "spk-node2", PodUID: "u2"},
		{Name: "ztunnel@far", Node: "far-node", PodUID: "u3"},
		{Name: "sidecar@far", Node: "far-node", PodUID: "u5", Container: "sidecar"},
		{Name: "agent@dead", Node: "dead-node", PodUID: "u4"},
		{Name: "lost", Node: "gone-node", PodUID: "u6"},
	}
	// First the three nodes that measured.
	m := Merge(nodes[:3], comps[:4])

	want := map[string]float64{
		// Whole path: the shared kernel once (from spk-node1, first by
		// name) plus far-node's.
		results.CPUCoresBusy:    1.03 + 0.71,
		results.CPUCoresSoftirq: 0.21 + 0.4,
		results.CPUCoresUser:    0.52 + 0.1,
		results.CPUCoresSystem:  0.3 + 0.2,
		results.CPUCoresIRQ:     0.01,
		results.CPUCoresForeign: 0.12 + 0.3,
		results.CPUCoresPath:    0.91 + 0.41,
		results.EnergyJoules:    151 + 90,
		results.EnergyEstimated: 1,
		results.ProbeWindow:     9.9,
		// The datapath: every node's pods.
		results.CPUCoresDatapath: 0.5 + 0.25 + 0.05,
		// Per node, each as it measured.
		"cpu_cores_busy{node=spk-node1}":         1.03,
		"cpu_cores_busy{node=spk-node2}":         1.0,
		"cpu_cores_softirq{node=far-node}":       0.4,
		"cpu_cores_path{node=spk-node2}":         0.9,
		"cpu_cores_datapath{node=spk-node1}":     0.5,
		"probe_window_s{node=far-node}":          10,
		"cpu_cores_softirq{node=spk-node2,cpu1}": 0.05,
		"cpu_cores_busy{node=spk-node1,cpu0}":    0.62,
		// Components from their nodes.
		"cpu_cores{router@east}":      0.5,
		"cpu_cores_peak{router@east}": 0.7,
		"rss_bytes_max{gw@west}":      3e7,
		"cpu_cores{ztunnel@far}":      0.05,
	}
	for k, w := range want {
		if g, ok := m.Metrics[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	for _, k := range []string{"cpu_cores_busy{cpu0}", "cpu_cores{cpu0}", "cpu_cores_busy{node=dead-node}"} {
		if v, ok := m.Metrics[k]; ok {
			t.Errorf("%s = %v, want absent", k, v)
		}
	}
	if why := m.Missing["cpu_cores{sidecar@far}"]; why != "node far-node: pod u5 container sidecar (abc): no process in its cgroup on this node" {
		t.Errorf("sidecar@far missing %q, want far-node's reason", why)
	}
	if why := m.Missing[results.EnergyRAPL]; why != "node spk-node1: no RAPL: estimated from CPU time" {
		t.Errorf("energy_rapl %q", why)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "spk-node1, spk-node2 share one kernel (boot ID b00t-1") ||
		!strings.Contains(m.Warnings[0], "from node spk-node1") {
		t.Errorf("warnings %q, want one naming spk-node1, spk-node2 and b00t-1", m.Warnings)
	}
	if len(m.Foreign) != 2 || m.Foreign[0].Comm != "backup" || m.Foreign[1].Cores != 0.12 {
		t.Errorf("foreign %+v, want backup 0.3 then spk-node1's etcd 0.12 (spk-node2's not again)", m.Foreign)
	}
	if pr := m.ProbeResult(); pr.Metrics[results.CPUCoresPath] != m.Metrics[results.CPUCoresPath] || len(pr.Foreign) != 2 || pr.Start != m.Start {
		t.Errorf("ProbeResult %+v differs from %+v", pr, m)
	}
	if m.Start != nodes[1].Start || m.End != nodes[0].End {
		t.Errorf("span %v–%v, want spk-node1's start to spk-node2's end", m.Start, m.End)
	}

	// Then with dead-node's failure and a component on a node with no
	// result: those are missing with the reason; dead-node is a kernel of
	// its own (no boot ID) that measured nothing, so the whole path's
	// figures are missing too; the nodes that measured keep theirs.
	m = Merge(nodes, comps)
	const dead = "node probe on dead-node: exec in pod node-probe-x7: container not found"
	wantMissing := map[string]string{
		"cpu_cores{agent@dead}":          dead,
		"rss_bytes_avg{agent@dead}":      dead,
		"cpu_cores_busy{node=dead-node}": dead,
		results.CPUCoresBusy:             dead,
		results.CPUCoresPath:             dead,
		"cpu_cores{lost}":                "node probe: no result from node gone-node",
	}
	for k, w := range wantMissing {
		if g := m.Missing[k]; g != w {
			t.Errorf("with dead-node: missing %s = %q, want %q", k, g, w)
		}
	}
	for _, k := range []string{results.CPUCoresBusy, results.CPUCoresDatapath} {
		if _, ok := m.Metrics[k]; ok {
			t.Errorf("with dead-node: %s present", k)
		}
	}
	if !strings.HasPrefix(m.Missing[results.CPUCoresDatapath], "node probe") {
		t.Errorf("with dead-node: datapath missing %q", m.Missing[results.CPUCoresDatapath])
	}
	if g := m.Metrics["cpu_cores_busy{node=far-node}"]; g != 0.71 {
		t.Errorf("with dead-node: far-node's busy %v, want 0.71", g)
	}
	if g := Merge(nil, nil).Missing[results.CPUCoresPath]; g != "node probe: no node results" {
		t.Errorf("no nodes: path missing %q", g)
	}
}

// Two clusters whose nodes share a name (two kind clusters'
// "kind-control-plane") on two machines: each node is named CONTEXT/NAME,
// each component comes from its own cluster's node, and both kernels
// count.
func TestMergeSameNodeNameInTwoClusters(t *testing.T) {
	node := func(ctx, boot string, busy, comp float64, name string) Result {
		return Result{Node: "kind-control-plane", Context: ctx, BootID: boot, Metrics: map[string]float64{
			results.CPUCoresBusy: busy, results.For(results.CPUCores, name): comp}}
	}
	m := Merge([]Result{node("west", "b2", 0.7, 0.2, "gw@west"), node("east", "b1", 0.5, 0.1, "gw@east")}, []results.Component{
		{Name: "gw@east", Context: "east", Node: "kind-control-plane"},
		{Name: "gw@west", Context: "west", Node: "kind-control-plane"},
	})
	for k, w := range map[string]float64{
		"cpu_cores_busy{node=east/kind-control-plane}": 0.5,
		"cpu_cores_busy{node=west/kind-control-plane}": 0.7,
		"cpu_cores{gw@east}":                           0.1,
		"cpu_cores{gw@west}":                           0.2,
		results.CPUCoresBusy:                           1.2,
	} {
		if g, ok := m.Metrics[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	if len(m.Warnings) != 0 {
		t.Errorf("warnings %q, want none (two kernels)", m.Warnings)
	}
}
