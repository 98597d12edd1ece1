package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/metricsapi"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// metricsAPI is the metrics API (metrics.k8s.io) of a run's clusters,
// which gives the component pods' CPU when neither probe: node nor
// prometheus: is set.
type metricsAPI struct {
	// clients are the clusters by context.
	clients map[string]*kube.Clients
	// why says, by context, why the cluster's metrics API cannot be read.
	why map[string]error
}

// newMetricsAPI finds which of tb's clusters serve the metrics API.
func newMetricsAPI(tb *kube.Testbed) *metricsAPI {
	var cs []*kube.Clients
	for _, s := range tb.KubeSites() {
		cs = append(cs, s.Clients())
	}
	return metricsAPIOf(cs)
}

// metricsAPIOf finds which of the clusters cs serve the metrics API.
func metricsAPIOf(cs []*kube.Clients) *metricsAPI {
	ma := &metricsAPI{clients: map[string]*kube.Clients{}, why: map[string]error{}}
	for _, c := range cs {
		if _, ok := ma.clients[c.Context]; ok {
			continue
		}
		ma.clients[c.Context] = c
		// Discovery has no context argument: the client's timeout bounds it.
		if err := metricsapi.Served(c.Kube.Discovery(), c.Context); err != nil {
			ma.why[c.Context] = err
		}
	}
	return ma
}

// metricsAPIRun is one trial's readings of its component pods, started at
// the measured window's mark.
type metricsAPIRun struct {
	ma   *metricsAPI
	recs map[string]*metricsapi.Recorder
	// pods are the component pods by component name, with their context.
	pods map[string]podIn
}

// podIn is a pod in a cluster.
type podIn struct {
	context string
	pod     metricsapi.Pod
}

// start begins reading comps' pods in the clusters that serve the API.
func (ma *metricsAPI) start(ctx context.Context, comps []results.Component) *metricsAPIRun {
	mr := &metricsAPIRun{ma: ma, recs: map[string]*metricsapi.Recorder{}, pods: map[string]podIn{}}
	byContext := map[string][]metricsapi.Pod{}
	for _, c := range comps {
		if c.Pod == "" {
			continue
		}
		cx := c.Context
		if cx == "" && len(ma.clients) == 1 {
			for k := range ma.clients {
				cx = k
			}
		}
		p := podIn{context: cx, pod: metricsapi.Pod{Namespace: c.Namespace, Name: c.Pod, Container: c.Container}}
		mr.pods[c.Name] = p
		if ma.clients[cx] != nil && ma.why[cx] == nil {
			byContext[cx] = append(byContext[cx], p.pod)
		}
	}
	for cx, pods := range byContext {
		mr.recs[cx] = metricsapi.Record(ctx, ma.clients[cx].Dynamic, pods, 0)
	}
	return mr
}

// apiFigures are a trial's component CPU figures from the metrics API.
type apiFigures struct {
	cores   map[string]float64
	missing map[string]string
	// source says where the figures came from and what they cover.
	source string
}

// stop ends the readings and makes each pod component's figure over
// [start, end] (missing, with the reason, where no reading's window lies
// inside it). A nil run (no metrics API looked for) gives every pod
// component missing.
func (mr *metricsAPIRun) stop(ctx context.Context, pods []results.Component, start, end time.Time) apiFigures {
	f := apiFigures{cores: map[string]float64{}, missing: map[string]string{}}
	if mr == nil {
		for _, c := range pods {
			f.missing[results.For(results.CPUCores, c.Name)] = "not measured: " + metricsapi.ErrNotServed.Error()
		}
		return f
	}
	samples := map[string]map[metricsapi.Pod][]metricsapi.Sample{}
	errs := map[string]map[metricsapi.Pod]error{}
	for cx, r := range mr.recs {
		samples[cx], errs[cx] = r.Stop(ctx)
	}
	var used []string
	for _, c := range pods {
		key := results.For(results.CPUCores, c.Name)
		p, ok := mr.pods[c.Name]
		switch {
		case !ok:
			f.missing[key] = "metrics API: component not read"
			continue
		case mr.ma.clients[p.context] == nil:
			f.missing[key] = fmt.Sprintf("metrics API: component %s names no cluster of the run (context %q)", c.Name, p.context)
			continue
		case mr.ma.why[p.context] != nil:
			f.missing[key] = "not measured: " + mr.ma.why[p.context].Error()
			continue
		}
		fig, err := metricsapi.FigureOf(samples[p.context][p.pod], start, end)
		if err != nil {
			why := fmt.Sprintf("metrics API: context %s pod %s: %v", p.context, p.pod, err)
			if rerr := errs[p.context][p.pod]; rerr != nil && errors.Is(err, metricsapi.ErrNoWindow) {
				why += "; last read error: " + rerr.Error()
			}
			f.missing[key] = why
			continue
		}
		f.cores[key] = fig.Cores
		n := "readings"
		if fig.Samples == 1 {
			n = "reading"
		}
		used = append(used, fmt.Sprintf("%s %d %s covering %.1f of %.1f s", c.Name, fig.Samples, n, fig.Covered.Seconds(), end.Sub(start).Seconds()))
	}
	if len(used) > 0 {
		f.source = "component CPU from the metrics API (metrics.k8s.io, rates over metrics-server's windows inside the measured window): " + strings.Join(used, "; ")
	}
	return f
}
