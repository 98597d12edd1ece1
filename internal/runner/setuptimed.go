package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/workload"
)

// setupTimed splits trials into those whose workload times a datapath's
// setup itself (workload.SetupTimer) and the rest.
func setupTimed(trials []Trial) (timed, rest []Trial) {
	for _, t := range trials {
		if info, ok := plugins.Workload(t.Point.Workload); ok {
			if _, ok := info.New().(workload.SetupTimer); ok {
				timed = append(timed, t)
				continue
			}
		}
		rest = append(rest, t)
	}
	return timed, rest
}

// setupTimeSlack bounds a setup-timed trial beyond its probe timeout: the
// datapath's setup and teardown.
const setupTimeSlack = 3 * time.Minute

// runSetupTimed runs trial t of a SetupTimer workload: the trial sets up
// datapath dp (named name) on tb itself, times it, and takes it down. The
// trial's CPU limits apply to that datapath's processes once it is set up,
// and its record carries them (cpu_limit_cores{C}); the cgroups' CPU is
// not measured.
func runSetupTimed(ctx context.Context, o Options, t Trial, tb testbed.Testbed, name string, dp datapath.Datapath) results.Record {
	rec := newRecord(o, t, time.Now())
	defer func() { rec.End = time.Now() }()
	info, _ := plugins.Workload(t.Point.Workload)
	st := info.New().(workload.SetupTimer)
	if c := fmt.Sprint(t.Point.Params[scenario.ClientParam]); strings.Contains(c, "+") {
		rec.Error = fmt.Sprintf("%s: runs one client; a client_site with several sites (%s) is for stream, rr and crr", t.Point.Workload, c)
		return rec
	}
	sites := tb.Sites()
	ci, si := siteIndexes(tb, t.Point.Params)
	limits := map[string]float64{}
	client, server := sites[ci], sites[si]
	env := workload.SetupEnv{
		Env: workload.Env{Client: client, Server: server, Port: agent.DefaultPort, Params: t.Point.Params,
			Duration: o.Scenario.Duration, Warmup: o.Scenario.Warmup, MkdirTemp: tb.Ledger().MkdirTemp},
		Build: func(ctx context.Context) (*workload.Built, error) {
			link, err := datapath.Build(ctx, name, dp, tb)
			if err != nil {
				return nil, err
			}
			rec.Components = link.Components
			_, _, target := EndpointsAt(tb, link, agent.DefaultPort, t.Point.Params)
			b := &workload.Built{Target: target, Components: link.Components, MaxConnections: link.MaxConnections,
				MaxConnectionsBy: link.MaxConnectionsBy, Close: link.Close}
			if !hasLimits([]Trial{t}) {
				return b, nil
			}
			// The trial's CPU limits apply to its own datapath's
			// processes once they run (not to their start-up): each in
			// a cgroup of its own, removed before the datapath.
			cgs := newComponentCgroups(tb.Ledger().Run(), tb.Ledger(), link.Components)
			b.Close = func(ctx context.Context) error { return errors.Join(cgs.Close(), link.Close(ctx)) }
			lim, err := cgs.apply(t.Point.Params)
			if err != nil {
				return nil, errors.Join(err, b.Close(ctx))
			}
			for c, cores := range lim {
				limits[results.For(results.CPULimitCores, c)] = cores
			}
			return b, nil
		},
	}
	if c, s, ok := gatewayNodes(tb, ci, si); ok {
		env.Client, env.Server = c, s
	}
	limit := setupTimeSlack
	if tl, ok := st.(workload.TrialLimiter); ok {
		limit += tl.TrialLimit(env.Env)
	} else if d, err := time.ParseDuration(fmt.Sprint(t.Point.Params["timeout"])); err == nil {
		limit += d
	}
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := st.TimeSetup(tctx, env)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Metrics, rec.Missing = res.Metrics, res.Missing
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	for k, v := range limits {
		rec.Metrics[k] = v
	}
	rec.Warnings = append(rec.Warnings, res.Warnings...)
	return rec
}
