package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// discoveryServed is discovery through a datapath that runs the server
// itself (env.Serve): the probe waits in the client's site; the clock
// starts as Serve starts creating the server and its exposure, and the
// probe gets its target the moment Serve returns. The checkpoints the
// datapath saw (pod Ready, endpoints ready) are timed from that start.
func discoveryServed(ctx context.Context, env ControlEnv) (*Result, error) {
	interval := durationParam(env.Params, "interval", time.Millisecond)
	timeout := durationParam(env.Params, "timeout", 30*time.Second)
	probe, err := startFirstUp(ctx, env.Client, interval, timeout)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	defer probe.stop()
	port := controlPort()
	t0 := time.Now()
	sv, err := env.Serve(ctx, env.Client, []testbed.Site{env.Server}, port)
	routed := time.Now()
	if err != nil {
		return nil, fmt.Errorf("discovery: serve port %d in %s: %w", port, env.Server.Name(), err)
	}
	var undoErr error
	defer func() {
		if undoErr == nil {
			undoWithin(&sv.Exposure)
		}
	}()
	target := sv.Target(env.Client)
	if err := probe.start(target); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	fu, err := probe.result(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var seen map[string]time.Time
	if sv.Checkpoints != nil {
		seen = sv.Checkpoints()
	}
	undoErr = undoWithin(&sv.Exposure)
	if fu.FirstOKNS == 0 {
		return nil, fmt.Errorf("discovery: no transaction through %s within %v of serving (%d attempts; last: %s)", target, timeout, fu.Attempts, fu.LastError)
	}
	if undoErr != nil {
		return nil, fmt.Errorf("discovery: undo: %w", undoErr)
	}
	since := func(ns int64) float64 { return time.Unix(0, ns).Sub(t0).Seconds() }
	m := map[string]float64{
		results.DiscoverySeconds:      since(fu.FirstOKNS),
		results.RouteInstalledSeconds: routed.Sub(t0).Seconds(),
		results.FirstConnectSeconds:   since(fu.FirstConnectNS),
		results.FirstResponseSeconds:  since(fu.FirstOKNS),
		results.ProbeAttempts:         float64(fu.Attempts),
	}
	for k, at := range seen {
		m[k] = at.Sub(t0).Seconds()
	}
	return &Result{Metrics: m}, nil
}

// failoverServed is failover through a datapath that runs the servers
// itself (env.Serve): it serves in both server sites, runs `agent
// failover` in the client's site, and fail_after after the first answer
// has the datapath fail the server in use (Served.Fail: on Kubernetes,
// its pod deleted). The checkpoints the datapath saw after the failure
// (endpoint gone, client's route switched) are timed from it.
func failoverServed(ctx context.Context, env ControlEnv) (*Result, error) {
	if fail := fmt.Sprint(env.Params["fail"]); fail != "server" && fail != "<nil>" {
		return nil, fmt.Errorf("failover: fail %s: this datapath runs its own servers and fails them only by deleting them (fail: server)", fail)
	}
	servers, err := failoverSites(env)
	if err != nil {
		return nil, err
	}
	fp, err := failoverParamsOf(env.Params)
	if err != nil {
		return nil, err
	}
	port := controlPort()
	sv, err := env.Serve(ctx, env.Client, servers, port)
	if err != nil {
		return nil, fmt.Errorf("failover: serve in %s and %s for %s: %w", servers[0].Name(), servers[1].Name(), env.Client.Name(), err)
	}
	if sv.Fail == nil {
		undoWithin(&sv.Exposure)
		return nil, errors.New("failover: the datapath cannot fail the servers it runs")
	}
	var undoErr error
	defer func() {
		if undoErr == nil {
			undoWithin(&sv.Exposure)
		}
	}()
	target := sv.Target(env.Client)
	probe, out, first, err := startFailoverProbe(ctx, env.Client, target, fp)
	if err != nil {
		return nil, err
	}
	defer probe.Stop(time.Second)
	if first.Site != servers[0].Name() && first.Site != servers[1].Name() {
		return nil, fmt.Errorf("failover: probe's first answer came from %q, not a server site", first.Site)
	}
	if err := sleepUntil(ctx, time.Unix(0, first.AtNS).Add(fp.failAfter)); err != nil {
		return nil, err
	}
	inUse := siteInUse(out.String(), first)
	var failed testbed.Site
	for _, s := range servers {
		if s.Name() == inUse.Site {
			failed = s
		}
	}
	failAt := time.Now()
	if err := sv.Fail(ctx, failed); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	run, err := failoverRunOf(ctx, probe, out)
	if err != nil {
		return nil, err
	}
	var seen map[string]time.Time
	if sv.Checkpoints != nil {
		seen = sv.Checkpoints()
	}
	undoErr = undoWithin(&sv.Exposure)
	m, err := failoverFigures(run, inUse.Site, failAt.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("failover: through %s after %s's server was deleted: %w", target, inUse.Site, err)
	}
	m[results.FailedAfterSeconds] = failAt.Sub(time.Unix(0, first.AtNS)).Seconds()
	for k, at := range seen {
		if !at.Before(failAt) {
			m[k] = at.Sub(failAt).Seconds()
		}
	}
	if undoErr != nil {
		return nil, fmt.Errorf("failover: undo: %w", undoErr)
	}
	return &Result{Metrics: m}, nil
}
