package nodeprobe

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
)

// NodeMetric names a node's machine-wide metric: "cpu_cores_busy{node=NAME}".
func NodeMetric(metric, node string) string { return results.For(metric, "node="+node) }

// NodeCPUMetric names one CPU's metric on a node:
// "cpu_cores_softirq{node=NAME,cpu0}" (locally "cpu_cores_softirq{cpu0}").
func NodeCPUMetric(metric, node, cpu string) string {
	return results.For(metric, "node="+node+","+cpu)
}

// kernelWide are the metrics of a whole kernel: summed over the kernels
// of the trial's nodes, each kernel once.
var kernelWide = []string{
	results.CPUCoresUser, results.CPUCoresSystem, results.CPUCoresIRQ, results.CPUCoresSoftirq,
	results.CPUCoresBusy, results.CPUCoresForeign, results.CPUCoresPath, results.EnergyJoules,
}

// nodeWide are the unqualified names in a node's Result that are the
// node's own (the rest are its components').
var nodeWide = append(slices.Clone(kernelWide), results.CPUCoresDatapath, results.ProbeWindow, results.EnergyEstimated, results.EnergyRAPL)

var perCPU = regexp.MustCompile(`^(.+)\{(cpu[0-9]+)\}$`)

// Merged is the node probes' results folded into one trial's figures.
type Merged struct {
	// Metrics holds, per node, its machine-wide figures as NodeMetric and
	// NodeCPUMetric name them; the components' figures under their own
	// names (results.For(results.CPUCores, NAME), ...); and the whole
	// path's, under the local names: CPUCoresUser, ..., CPUCoresBusy,
	// CPUCoresForeign, CPUCoresPath and EnergyJoules summed over the
	// kernels (nodes that share a boot ID counted once), CPUCoresDatapath
	// over the nodes, EnergyEstimated the largest, ProbeWindow the
	// shortest.
	Metrics map[string]float64
	// Missing maps each figure that could not be had to the reason,
	// naming the node.
	Missing map[string]string
	// Warnings say which nodes shared a kernel.
	Warnings []string
	// Foreign lists the foreign processes of the kernels counted, most
	// CPU first.
	Foreign []probe.ProcessCPU
	// Start and End span the nodes' windows: the earliest first sample,
	// the latest last.
	Start, End time.Time
}

// Merge folds the Results of the trial's node probes (one per node, of
// every cluster; a node whose probe failed has Error set) into one
// trial's figures. A node is named by its name, or CONTEXT/NAME where
// nodes of two clusters (Result.Context) share a name. comps are the
// trial's pod components: each is taken from the Result of its Node (and
// Context, where set; from any Result that has it when Node is ""), or
// missing with the reason.
func Merge(nodes []Result, comps []results.Component) Merged {
	m := Merged{Metrics: map[string]float64{}, Missing: map[string]string{}}
	nodes = slices.Clone(nodes)
	slices.SortStableFunc(nodes, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Context, b.Context))
	})
	// A node's name is its label, qualified by its context where two
	// clusters have a node of that name.
	type where struct{ node, context string }
	orig := make([]where, len(nodes))
	contexts := map[string]map[string]bool{}
	for i, r := range nodes {
		orig[i] = where{r.Node, r.Context}
		if contexts[r.Node] == nil {
			contexts[r.Node] = map[string]bool{}
		}
		contexts[r.Node][r.Context] = true
	}
	for i := range nodes {
		if len(contexts[orig[i].node]) > 1 {
			nodes[i].Node = orig[i].context + "/" + orig[i].node
		}
	}
	// onNode is the Result of the node component c ran on.
	onNode := func(c results.Component) *Result {
		for i, o := range orig {
			if o.node == c.Node && (c.Context == "" || o.context == "" || o.context == c.Context) {
				return &nodes[i]
			}
		}
		return nil
	}

	// Each node's own figures, renamed; a failed node's are missing.
	for _, r := range nodes {
		if r.Error != "" {
			for _, k := range nodeWide {
				m.Missing[NodeMetric(k, r.Node)] = r.failure()
			}
			continue
		}
		for k, v := range r.Metrics {
			if name, ok := nodeName(k, r.Node); ok {
				m.Metrics[name] = v
			}
		}
		for k, why := range r.Missing {
			if name, ok := nodeName(k, r.Node); ok {
				m.Missing[name] = why
			}
		}
		if !r.Start.IsZero() && (m.Start.IsZero() || r.Start.Before(m.Start)) {
			m.Start = r.Start
		}
		if r.End.After(m.End) {
			m.End = r.End
		}
	}

	// The components, each from its node's probe.
	for _, c := range comps {
		names := []string{results.CPUCores, results.CPUCoresPeak, results.RSSBytesMax, results.RSSBytesAvg}
		var from *Result
		if c.Node != "" {
			from = onNode(c)
		} else {
			for i := range nodes {
				if _, ok := nodes[i].Metrics[results.For(results.CPUCores, c.Name)]; ok {
					from = &nodes[i]
					break
				}
			}
		}
		for _, n := range names {
			k := results.For(n, c.Name)
			switch {
			case from == nil && c.Node != "":
				m.Missing[k] = fmt.Sprintf("node probe: no result from node %s", c.Node)
			case from == nil:
				m.Missing[k] = "node probe: no node measured it (its node is not known)"
			case from.Error != "":
				m.Missing[k] = from.failure()
			default:
				if v, ok := from.Metrics[k]; ok {
					m.Metrics[k] = v
				} else if why, ok := from.Missing[k]; ok {
					m.Missing[k] = "node " + from.Node + ": " + why
				} else {
					m.Missing[k] = fmt.Sprintf("node probe on %s: not asked to measure it", from.Node)
				}
			}
		}
	}

	// The whole path: each kernel once.
	if len(nodes) == 0 {
		for _, k := range append(slices.Clone(kernelWide), results.CPUCoresDatapath) {
			m.Missing[k] = "node probe: no node results"
		}
		return m
	}
	type kernel struct {
		boot  string
		nodes []*Result
	}
	var kernels []*kernel
	byBoot := map[string]*kernel{}
	for i := range nodes {
		r := &nodes[i]
		key := r.BootID
		if key == "" {
			key = "node " + r.Node // a kernel that did not say is a kernel of its own
		}
		k := byBoot[key]
		if k == nil {
			k = &kernel{boot: r.BootID}
			byBoot[key] = k
			kernels = append(kernels, k)
		}
		k.nodes = append(k.nodes, r)
	}
	var counted []*Result
	for _, k := range kernels {
		// Its first node that measured, by name.
		var rep *Result
		for _, r := range k.nodes {
			if r.Error == "" {
				rep = r
				break
			}
		}
		if rep == nil {
			rep = k.nodes[0]
		}
		counted = append(counted, rep)
		if len(k.nodes) > 1 {
			var names []string
			for _, r := range k.nodes {
				names = append(names, r.Node)
			}
			m.Warnings = append(m.Warnings, fmt.Sprintf("nodes %s share one kernel (boot ID %s, one machine): its CPU and energy count once in the whole path's figures, from node %s",
				strings.Join(names, ", "), k.boot, rep.Node))
		}
	}
	for _, k := range kernelWide {
		sum, why := 0.0, ""
		for _, r := range counted {
			if r.Error != "" {
				why = r.failure()
				break
			}
			v, ok := r.Metrics[k]
			if !ok {
				why = fmt.Sprintf("node %s: %s", r.Node, cmp.Or(r.Missing[k], "not measured"))
				break
			}
			sum += v
		}
		if why != "" {
			m.Missing[k] = why
		} else {
			m.Metrics[k] = sum
		}
	}
	if _, ok := m.Metrics[results.EnergyJoules]; ok {
		est := 0.0
		for _, r := range counted {
			est = max(est, r.Metrics[results.EnergyEstimated])
		}
		m.Metrics[results.EnergyEstimated] = est
		for _, r := range counted {
			if why, ok := r.Missing[results.EnergyRAPL]; ok {
				m.Missing[results.EnergyRAPL] = "node " + r.Node + ": " + why
				break
			}
		}
	}
	window, ok := 0.0, true
	for _, r := range nodes {
		w, has := r.Metrics[results.ProbeWindow]
		if !has {
			ok = false
			break
		}
		if window == 0 || w < window {
			window = w
		}
	}
	if ok {
		m.Metrics[results.ProbeWindow] = window
	}
	// The datapath's processes: every node's, since a pod runs on one node.
	dp, dpWhy, any := 0.0, "", false
	for _, r := range nodes {
		if r.Error != "" {
			continue
		}
		if v, ok := r.Metrics[results.CPUCoresDatapath]; ok {
			dp += v
			any = true
		} else if why, ok := r.Missing[results.CPUCoresDatapath]; ok && dpWhy == "" {
			dpWhy = "node " + r.Node + ": " + why
		}
	}
	for _, c := range comps {
		if r := onNode(c); c.Node != "" && (r == nil || r.Error != "") && dpWhy == "" {
			dpWhy = m.Missing[results.For(results.CPUCores, c.Name)]
		}
	}
	switch {
	case dpWhy != "":
		m.Missing[results.CPUCoresDatapath] = dpWhy
	case any:
		m.Metrics[results.CPUCoresDatapath] = dp
	}
	for _, r := range counted {
		m.Foreign = append(m.Foreign, r.Foreign...)
	}
	slices.SortStableFunc(m.Foreign, func(a, b probe.ProcessCPU) int { return cmp.Compare(b.Cores, a.Cores) })
	return m
}

// failure is why a failed node probe measured nothing.
func (r *Result) failure() string {
	return fmt.Sprintf("node probe on %s: %s", r.Node, r.Error)
}

// nodeName renames a node Result's metric k if it is the node's own (an
// unqualified machine-wide name, or one CPU's); ok is false for a
// component's.
func nodeName(k, node string) (string, bool) {
	if slices.Contains(nodeWide, k) {
		return NodeMetric(k, node), true
	}
	if s := perCPU.FindStringSubmatch(k); s != nil {
		return NodeCPUMetric(s[1], node, s[2]), true
	}
	return "", false
}

// ProbeResult is m as a probe.Result (Warnings aside), to stand where a
// local trial's probe result does.
func (m Merged) ProbeResult() probe.Result {
	return probe.Result{Metrics: m.Metrics, Missing: m.Missing, Start: m.Start, End: m.End, Foreign: m.Foreign}
}
