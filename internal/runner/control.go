package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// controlRunner returns the workload of trial t when it is a
// workload.ControlRunner.
func controlRunner(t Trial) (workload.ControlRunner, bool) {
	info, ok := plugins.Workload(t.Point.Workload)
	if !ok {
		return nil, false
	}
	cr, ok := info.New().(workload.ControlRunner)
	return cr, ok
}

// controlSlack bounds a control-plane trial beyond the longest of its
// duration parameters (timeout, run_for): servers' start, exposing, undo.
const controlSlack = time.Minute

// runControl runs trial t of a ControlRunner workload on the group's
// link: the workload exposes services through it and routes to them
// (Link.Expose, Link.Redundant). Nothing is probed: what it measures is
// time, not cost.
func runControl(ctx context.Context, o Options, t Trial, tb testbed.Testbed, link *datapath.Link, cr workload.ControlRunner, client, server testbed.Site) results.Record {
	rec := newRecord(o, t, time.Now())
	rec.Components = link.Components
	defer func() { rec.End = time.Now() }()
	env := workload.ControlEnv{
		Env: workload.Env{Client: client, Server: server, Port: agent.DefaultPort, Params: t.Point.Params,
			Duration: o.Scenario.Duration, Warmup: o.Scenario.Warmup, MkdirTemp: tb.Ledger().MkdirTemp},
		Sites: tb.Sites(),
	}
	if link.Expose != nil {
		env.Expose = func(ctx context.Context, to testbed.Site, port int) (*workload.Exposure, error) {
			e, err := link.Expose(ctx, to, port)
			if err != nil {
				return nil, err
			}
			return &workload.Exposure{Target: e.Target, Undo: e.Undo}, nil
		}
	}
	if link.Redundant != nil {
		env.Redundant = func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*workload.Exposure, error) {
			e, err := link.Redundant(ctx, from, to, port)
			if err != nil {
				return nil, err
			}
			return &workload.Exposure{Target: e.Target, Undo: e.Undo}, nil
		}
	}
	if link.Serve != nil {
		env.Serve = func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*workload.Served, error) {
			sv, err := link.Serve(ctx, from, to, port)
			if err != nil {
				return nil, err
			}
			return &workload.Served{Exposure: workload.Exposure{Target: sv.Target, Undo: sv.Undo}, Checkpoints: sv.Checkpoints, Fail: sv.Fail}, nil
		}
	}
	if ltb, ok := tb.(*netns.Testbed); ok {
		env.Isolate = func(site testbed.Site) (func() error, error) {
			s, ok := site.(*netns.Site)
			if !ok {
				return nil, fmt.Errorf("isolate %s: not a local site", site.Name())
			}
			return ltb.Isolate(s)
		}
	}
	limit := controlSlack
	for _, k := range []string{"timeout", "run_for"} {
		if d, err := time.ParseDuration(fmt.Sprint(t.Point.Params[k])); err == nil {
			limit += d
		}
	}
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := cr.RunControl(tctx, env)
	if link.Alive != nil {
		if derr := link.Alive(); derr != nil && err == nil {
			err = derr
		}
	}
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Metrics = res.Metrics
	return rec
}

// incapable prints, once per pair, each workload that a datapath of s
// cannot run and why: the plan leaves those pairs out.
func (p *progress) incapable(s *scenario.Scenario) {
	if p.w == nil {
		return
	}
	seen := map[string]bool{}
	for _, w := range s.Workloads {
		for _, d := range s.Datapaths {
			if seen[w.Type+"\x00"+d.Label] {
				continue
			}
			seen[w.Type+"\x00"+d.Label] = true
			if err := s.Incapable(plugins.Catalog{}, d.Label, w.Type); err != nil {
				fmt.Fprintf(p.w, "not planned: %s on %s: %v\n", w.Type, d.Label, err)
			}
		}
	}
}
