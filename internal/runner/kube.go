package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/prom"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// ConnectTimeout bounds the first answer of each cluster's API server.
const ConnectTimeout = 15 * time.Second

// KubeSpec is the Kubernetes testbed scenario s asks for, for run id.
func KubeSpec(s *scenario.Scenario, id string) kube.Spec {
	spec := kube.Spec{Run: id, Image: s.Kube.Image, ServerImage: s.Kube.ServerImage, ShareNode: s.Kube.ShareNode}
	for _, st := range s.SiteList {
		ks := kube.SiteSpec{Name: st.Name, Context: st.Context, Kubeconfig: st.Kubeconfig, NodeSelector: st.NodeSelector}
		for _, t := range st.Tolerations {
			ks.Tolerations = append(ks.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
				Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
		spec.Sites = append(spec.Sites, ks)
	}
	return spec
}

// errNoImage is the error of a run on Kubernetes sites without an agent image.
var errNoImage = errors.New("no agent image: build it with `spanperf image -o spanperf.tar --push REGISTRY/spanperf:TAG` (or `make image`) and name it with image: in the scenario or --image")

// newKubeTestbed connects to the clusters of s's sites, runs dp's
// preflight against them before anything is created, and creates the
// run's namespaces and agent pods shaped as dp asks.
func newKubeTestbed(ctx context.Context, s *scenario.Scenario, id string, dp datapath.Datapath) (*kube.Testbed, error) {
	spec := KubeSpec(s, id)
	if spec.Image == "" {
		return nil, errNoImage
	}
	clients := make([]*kube.Clients, len(spec.Sites))
	byCluster := map[[2]string]*kube.Clients{}
	for i, st := range spec.Sites {
		key := [2]string{st.Kubeconfig, st.Context}
		if c, ok := byCluster[key]; ok {
			clients[i] = c
			continue
		}
		c, err := kube.Connect(ctx, st, ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", st.Name, err)
		}
		byCluster[key], clients[i] = c, c
	}
	if pf, ok := dp.(kube.Preflighter); ok {
		if err := pf.Preflight(ctx, spec.Sites, clients); err != nil {
			return nil, fmt.Errorf("preflight: %w", err)
		}
	}
	if sh, ok := dp.(kube.Shaper); ok {
		sh.Shape(&spec.Shape)
	}
	if s.Kube.Probe == scenario.ProbeNode {
		kube.ShapeNodeProbe(&spec.Shape)
	}
	return kube.New(ctx, spec)
}

// kubeProbed is the probe of a trial on Kubernetes sites over the window
// [start, end): the machine the controller runs on is not the nodes, so
// its own probe would measure the wrong CPU. With prometheus: URL, each
// pod component's CPU (and Kepler's energy) comes from Prometheus;
// without, from the metrics API's readings mr took during the window (nil:
// none taken); node-level figures (busy, softirq, path) come only from the
// node probe.
func kubeProbed(ctx context.Context, s *scenario.Scenario, comps []results.Component, start, end time.Time, mr *metricsAPIRun) *probed {
	pd := &probed{comps: comps, s: s, res: probe.Result{Metrics: map[string]float64{}, Missing: map[string]string{}, Start: start, End: end}}
	m, miss := pd.res.Metrics, pd.res.Missing
	nodeWhy := "not measured: probe: none on Kubernetes sites (probe: node runs the node probe)"
	for _, k := range []string{results.CPUCoresBusy, results.CPUCoresSoftirq, results.CPUCoresPath, results.CPUCoresForeign} {
		miss[k] = nodeWhy
	}
	if start.IsZero() || !end.After(start) {
		pd.err = errNoWindow
		mr.stop(ctx, nil, start, end)
		return pd
	}
	var pods []results.Component
	for _, c := range comps {
		if c.Pod != "" {
			pods = append(pods, c)
		}
	}
	if len(pods) == 0 {
		why := "not measured: the datapath has no pods (the kernel's work shows only in the node probe's figures)"
		miss[results.CPUCoresDatapath], miss[results.EnergyJoules] = why, why
		mr.stop(ctx, nil, start, end)
		return pd
	}
	if s.Kube.Prometheus == "" {
		f := mr.stop(ctx, pods, start, end)
		maps.Copy(m, f.cores)
		maps.Copy(miss, f.missing)
		if len(f.missing) == 0 {
			m[results.CPUCoresDatapath] = 0
			for _, v := range f.cores {
				m[results.CPUCoresDatapath] += v
			}
		} else {
			miss[results.CPUCoresDatapath] = "metrics API: a component's CPU is missing"
		}
		miss[results.EnergyJoules] = "not measured: the metrics API has no energy (prometheus: with Kepler has)"
		if f.source != "" {
			pd.warnings = append(pd.warnings, f.source)
		}
		return pd
	}
	pc := &prom.Client{URL: s.Kube.Prometheus}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cpuSum, joules := 0.0, 0.0
	cpuOK, joulesOK := true, true
	for _, c := range pods {
		if v, err := pc.PodCPU(qctx, c.Namespace, c.Pod, c.Container, start, end); err != nil {
			miss[results.For(results.CPUCores, c.Name)] = err.Error()
			cpuOK = false
		} else {
			m[results.For(results.CPUCores, c.Name)] = v
			cpuSum += v
		}
		if v, err := pc.PodJoules(qctx, c.Namespace, c.Pod, c.Container, start, end); err != nil {
			if joulesOK {
				miss[results.EnergyJoules] = "kepler: " + err.Error()
			}
			joulesOK = false
		} else {
			joules += v
		}
	}
	if cpuOK {
		m[results.CPUCoresDatapath] = cpuSum
	} else {
		miss[results.CPUCoresDatapath] = "prometheus: a component's CPU is missing"
	}
	if joulesOK {
		m[results.EnergyJoules] = joules
	}
	return pd
}
