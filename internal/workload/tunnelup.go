package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// SetupTimer is a workload that times a datapath's life itself, or needs
// a datapath fresh for each trial (connections: memory a process keeps
// after a trial's connections close would carry into the next): the
// runner gives each of its trials a datapath of their own to set up and
// take down (SetupEnv.Build) instead of the group's, and calls TimeSetup
// instead of Run. Its trials are not probed. A SetupTimer that is also a
// TrialLimiter is stopped after its TrialLimit (plus the time setup and
// teardown may take).
type SetupTimer interface {
	TimeSetup(ctx context.Context, env SetupEnv) (*Result, error)
}

// SetupEnv is what a SetupTimer's trial gets: the sites and parameters of
// Env (its Target is unset: no datapath exists yet) and Build.
type SetupEnv struct {
	Env
	// Build sets the trial's datapath up. The caller must call the
	// result's Close once Build succeeded.
	Build func(ctx context.Context) (*Built, error)
}

// Built is a datapath a SetupTimer's trial set up.
type Built struct {
	// Target is what the client dials.
	Target testbed.Target
	// Components are the processes (or the kernel) that carry the
	// traffic, as datapath.Link's.
	Components []results.Component
	// MaxConnections, when > 0, is the most connections at once the
	// datapath carries, and MaxConnectionsBy what sets it (datapath.Link's).
	MaxConnections   int
	MaxConnectionsBy string
	// Close takes the datapath down.
	Close func(context.Context) error
}

// TunnelUpInfo registers tunnel-up.
func TunnelUpInfo() Info {
	return Info{
		Name: "tunnel-up",
		Summary: "a datapath's setup, timed per trial: setup time, time from setup's start to the first successful transaction " +
			"through it (probed every interval), teardown time",
		Params: []scenario.Field{
			{Name: "interval", Kind: scenario.KindDuration, Default: time.Millisecond, Doc: "how often the probe starts a connection attempt"},
			{Name: "timeout", Kind: scenario.KindDuration, Default: 30 * time.Second, Doc: "give up when no transaction succeeds this long after setup returned"},
		},
		New: func() Workload { return tunnelUp{} },
	}
}

// tunnelUp is the tunnel-up workload.
type tunnelUp struct{}

var _ SetupTimer = tunnelUp{}

// Run refuses: tunnel-up needs a datapath of its own (SetupTimer).
func (tunnelUp) Run(context.Context, Env) (*Result, error) {
	return nil, errors.New("tunnel-up: times a datapath of its own; the runner calls TimeSetup")
}

// TimeSetup starts the agent's server in the server site and the probe
// (`agent firstup`, waiting for its target on standard input) in the
// client's, then builds the datapath, hands the probe the target the
// moment setup returns, waits for the first transaction, and takes the
// datapath down.
func (tunnelUp) TimeSetup(ctx context.Context, env SetupEnv) (*Result, error) {
	interval := durationParam(env.Params, "interval", time.Millisecond)
	timeout := durationParam(env.Params, "timeout", 30*time.Second)
	srv, err := StartAgentServer(ctx, env.Server, env.Port)
	if err != nil {
		return nil, fmt.Errorf("tunnel-up: %w", err)
	}
	defer srv.Stop(time.Second)
	probe, err := startFirstUp(ctx, env.Client, interval, timeout)
	if err != nil {
		return nil, fmt.Errorf("tunnel-up: %w", err)
	}
	defer probe.stop()
	t0 := time.Now()
	built, err := env.Build(ctx)
	t1 := time.Now()
	if err != nil {
		return nil, fmt.Errorf("tunnel-up: setup: %w", err)
	}
	target, closeLink := built.Target, built.Close
	closed := false
	defer func() {
		if !closed {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			closeLink(cctx)
		}
	}()
	if err := probe.start(target); err != nil {
		return nil, fmt.Errorf("tunnel-up: %w", err)
	}
	fu, err := probe.result(ctx)
	if err != nil {
		return nil, fmt.Errorf("tunnel-up: %w", err)
	}
	closed = true
	t2 := time.Now()
	cerr := closeLink(ctx)
	teardown := time.Since(t2)
	if cerr != nil {
		return nil, fmt.Errorf("tunnel-up: teardown: %w", cerr)
	}
	if fu.FirstOKNS == 0 {
		return nil, fmt.Errorf("tunnel-up: no transaction through %s within %v of setup (%d attempts; last: %s)", target, timeout, fu.Attempts, fu.LastError)
	}
	return &Result{Metrics: map[string]float64{
		results.SetupSeconds:    t1.Sub(t0).Seconds(),
		results.TunnelUpSeconds: time.Unix(0, fu.FirstOKNS).Sub(t0).Seconds(),
		results.TeardownSeconds: teardown.Seconds(),
		results.ProbeAttempts:   float64(fu.Attempts),
	}}, nil
}

// waitLine waits until p has written a whole line to out.
func waitLine(ctx context.Context, p testbed.Process, out *testbed.SyncBuffer, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !strings.Contains(out.String(), "\n") {
		select {
		case <-p.Done():
			return fmt.Errorf("exited before it was ready: %v: %s", p.Wait(), p.Tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %s", limit, p.Tail())
		}
	}
	return nil
}

// durationParam reads a duration parameter (a Duration's String form in a
// point) or returns def.
func durationParam(p results.Params, name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(fmt.Sprint(p[name])); err == nil && d > 0 {
		return d
	}
	return def
}
