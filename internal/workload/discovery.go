package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// DiscoveryInfo registers discovery.
func DiscoveryInfo() Info {
	return Info{
		Name: "discovery",
		Summary: "with the datapath up, a new server starts in the server site and is exposed through the datapath's own mechanism; " +
			"time until the first transaction from the client's site succeeds (probed every interval), with checkpoints",
		Params: []scenario.Field{
			{Name: "interval", Kind: scenario.KindDuration, Default: time.Millisecond, Doc: "how often the probe starts a connection attempt"},
			{Name: "timeout", Kind: scenario.KindDuration, Default: 30 * time.Second, Doc: "give up when no transaction succeeds this long after exposing returned"},
		},
		New:   func() Workload { return discovery{} },
		Needs: "expose",
		// On Kubernetes sites the datapath runs the servers as pods
		// (datapath.Link.Serve) and the probe runs in the client's pod.
		Pods: true,
	}
}

// discovery is the discovery workload.
type discovery struct{}

var _ ControlRunner = discovery{}

// Run refuses: discovery changes what the datapath serves (ControlRunner).
func (discovery) Run(context.Context, Env) (*Result, error) {
	return nil, errors.New("discovery: exposes a service through the datapath; the runner calls RunControl")
}

// RunControl starts the probe in the client's site (waiting for its
// target), then at once starts a new server on a fresh port in the server
// site and has the datapath expose it; the probe gets its target the
// moment exposing returns. The server and the exposure are removed after.
func (discovery) RunControl(ctx context.Context, env ControlEnv) (*Result, error) {
	if env.Serve != nil {
		return discoveryServed(ctx, env)
	}
	if env.Expose == nil {
		return nil, errors.New("discovery: the datapath cannot expose a service after setup")
	}
	interval := durationParam(env.Params, "interval", time.Millisecond)
	timeout := durationParam(env.Params, "timeout", 30*time.Second)
	probe, err := startFirstUp(ctx, env.Client, interval, timeout)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	defer probe.stop()
	port := controlPort()
	type started struct {
		p   testbed.Process
		at  time.Time
		err error
	}
	srvc := make(chan started, 1)
	t0 := time.Now()
	go func() {
		p, err := startAgent(ctx, env.Server, "agent-server", "serve", "--listen", ":"+strconv.Itoa(port))
		srvc <- started{p, time.Now(), err}
	}()
	exp, err := env.Expose(ctx, env.Server, port)
	routed := time.Now()
	srv := <-srvc
	if srv.err == nil {
		defer srv.p.Stop(time.Second)
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: expose port %d on %s: %w", port, env.Server.Name(), err)
	}
	var undoErr error
	defer func() {
		if undoErr == nil {
			undoWithin(exp)
		}
	}()
	if srv.err != nil {
		return nil, fmt.Errorf("discovery: server: %w", srv.err)
	}
	target := exp.Target(env.Client)
	if err := probe.start(target); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	fu, err := probe.result(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	undoErr = undoWithin(exp)
	if fu.FirstOKNS == 0 {
		return nil, fmt.Errorf("discovery: no transaction through %s within %v of exposing (%d attempts; last: %s)", target, timeout, fu.Attempts, fu.LastError)
	}
	if undoErr != nil {
		return nil, fmt.Errorf("discovery: undo: %w", undoErr)
	}
	since := func(ns int64) float64 { return time.Unix(0, ns).Sub(t0).Seconds() }
	return &Result{Metrics: map[string]float64{
		results.DiscoverySeconds:      since(fu.FirstOKNS),
		results.ProcessReadySeconds:   srv.at.Sub(t0).Seconds(),
		results.RouteInstalledSeconds: routed.Sub(t0).Seconds(),
		results.FirstConnectSeconds:   since(fu.FirstConnectNS),
		results.FirstResponseSeconds:  since(fu.FirstOKNS),
		results.ProbeAttempts:         float64(fu.Attempts),
	}}, nil
}
