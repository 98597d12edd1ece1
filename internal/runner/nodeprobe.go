package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// nodeProbeReady bounds the wait for the node probe's pods.
const nodeProbeReady = 2 * time.Minute

// probeCluster is one cluster of a run with its node probe.
type probeCluster struct {
	clients *kube.Clients
	ns      string
	// probes maps each node to its probe pod.
	probes map[string]string
}

// nodeProbes are the node probes of a run on Kubernetes sites (probe:
// node): a DaemonSet in each cluster's run namespace, which the
// namespace's deletion removes.
type nodeProbes struct {
	clusters []*probeCluster
}

// startNodeProbes creates the node probe DaemonSet in every cluster of tb
// and waits until a probe pod is Ready on every node the run's pods run on.
func startNodeProbes(ctx context.Context, tb *kube.Testbed, image string) (*nodeProbes, error) {
	np := &nodeProbes{}
	byCluster := map[*kube.Clients]*probeCluster{}
	nodes := map[*kube.Clients][]string{}
	for _, s := range tb.KubeSites() {
		c := s.Clients()
		if byCluster[c] == nil {
			byCluster[c] = &probeCluster{clients: c, ns: s.Namespace()}
			np.clusters = append(np.clusters, byCluster[c])
		}
		if p := s.Pod(); p != nil && !slices.Contains(nodes[c], p.Spec.NodeName) {
			nodes[c] = append(nodes[c], p.Spec.NodeName)
		}
	}
	for _, pc := range np.clusters {
		probes, err := kube.StartNodeProbe(ctx, pc.clients, pc.ns, tb.Spec().Run, image, nodes[pc.clients], nodeProbeReady)
		if err != nil {
			return nil, err
		}
		pc.probes = probes
	}
	return np, nil
}

// probeRun is one trial's node probe collection, started at the measured
// window's mark.
type probeRun struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []nodeprobe.Result
	err     error
}

// start plans the trial's node probes (the components on their nodes, the
// run's pods as its own) and runs them on every node concurrently.
func (np *nodeProbes) start(ctx context.Context, s *scenario.Scenario, comps []results.Component, delay, length time.Duration) *probeRun {
	pr := &probeRun{}
	// Every cluster's pods, to tell each node which processes are the
	// run's (clusters that share a machine see each other's).
	pods := make([][]corev1.Pod, len(np.clusters))
	var all []string
	for i, pc := range np.clusters {
		l, err := pc.clients.Kube.CoreV1().Pods(pc.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			pr.err = fmt.Errorf("node probe: context %s: list pods in %s: %w", pc.clients.Context, pc.ns, err)
			return pr
		}
		pods[i] = l.Items
		for _, c := range comps {
			if c.Pod == "" || !sameCluster(c, pc) {
				continue
			}
			p, err := pc.clients.Kube.CoreV1().Pods(c.Namespace).Get(ctx, c.Pod, metav1.GetOptions{})
			if err != nil {
				pr.err = fmt.Errorf("node probe: component %s: %w", c.Name, err)
				return pr
			}
			pods[i] = append(pods[i], *p)
		}
		for _, p := range pods[i] {
			all = append(all, string(p.UID))
		}
	}
	for i, pc := range np.clusters {
		var mine []results.Component
		for _, c := range comps {
			if c.Pod != "" && sameCluster(c, pc) {
				mine = append(mine, c)
			}
		}
		base := nodeprobe.Spec{
			Delay: nodeprobe.Duration(delay), Window: nodeprobe.Duration(length),
			Interval: nodeprobe.Duration(s.ProbeInterval),
			Energy:   probe.EnergyModel{IdleWatts: s.Energy.IdleWatts, WattsPerCore: s.Energy.WattsPerCore},
			RunPods:  all,
		}
		specs, err := nodeprobe.Plan(base, mine, pods[i])
		if err != nil {
			pr.err = err
			return pr
		}
		pr.wg.Add(1)
		go func() {
			defer pr.wg.Done()
			rs := nodeprobe.Collect(ctx, pc.clients.Exec, pc.clients.Context, pc.ns, kube.NodeProbeName, maps.Clone(pc.probes), specs)
			pr.mu.Lock()
			pr.results = append(pr.results, rs...)
			pr.mu.Unlock()
		}()
	}
	return pr
}

// sameCluster tells whether component c is in pc's cluster: its context
// names it (or, without one, the cluster is the run's only one).
func sameCluster(c results.Component, pc *probeCluster) bool {
	return c.Context == pc.clients.Context || c.Context == ""
}

// wait waits for the collection (each node's exec is bounded by its
// window) and folds the nodes' results into the trial's probe.
func (pr *probeRun) wait(s *scenario.Scenario, comps []results.Component) *probed {
	pr.wg.Wait()
	if pr.err != nil {
		return unprobed(s, comps, pr.err)
	}
	var pods []results.Component
	for _, c := range comps {
		if c.Pod != "" {
			pods = append(pods, c)
		}
	}
	slices.SortFunc(pr.results, func(a, b nodeprobe.Result) int {
		if a.Context != b.Context {
			return strings.Compare(a.Context, b.Context)
		}
		return strings.Compare(a.Node, b.Node)
	})
	m := nodeprobe.Merge(pr.results, pods)
	pd := &probed{comps: comps, s: s, res: m.ProbeResult()}
	if len(pr.results) == 0 {
		pd.err = errors.New("not measured: no node ran a probe")
	}
	pd.warnings = m.Warnings
	return pd
}
