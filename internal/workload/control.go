package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// ControlRunner is a workload that changes what the group's datapath
// serves while it runs (discovery, failover): the runner calls RunControl
// instead of Run, with the datapath's capabilities in ControlEnv.
type ControlRunner interface {
	RunControl(ctx context.Context, env ControlEnv) (*Result, error)
}

// ControlEnv is what a ControlRunner's trial gets: Env (its Target is the
// group's service, which a ControlRunner does not use), the testbed's
// sites, and what the datapath can do after setup. A capability the
// datapath lacks is nil (the scenario's validation refuses such pairs).
type ControlEnv struct {
	Env
	// Sites are the testbed's sites, in order.
	Sites []testbed.Site
	// Expose exposes a service started after setup: port on site to,
	// reachable from every other site (datapath.ExposeFunc).
	Expose func(ctx context.Context, to testbed.Site, port int) (*Exposure, error)
	// Redundant routes a client in from to port served in every site of
	// to, preferring to[0] (datapath.RedundantFunc).
	Redundant func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Exposure, error)
	// Serve, when set, is a datapath that runs the servers itself (on
	// Kubernetes: pods it creates) and exposes them, to one site or to two
	// preferring to[0] (datapath.ServeFunc); discovery and failover use it
	// in place of starting agents in the sites and Expose or Redundant.
	Serve func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Served, error)
	// Isolate, when set, cuts a site off the underlay as if its gateway
	// died (packets from and to it silently dropped); restore lifts the
	// cut.
	Isolate func(site testbed.Site) (restore func() error, err error)
}

// Exposure is a service made reachable through the datapath
// (datapath.Exposure).
type Exposure struct {
	// Target returns what a client in site from dials.
	Target func(from testbed.Site) testbed.Target
	// Undo removes the exposure; safe once.
	Undo func(context.Context) error
}

// Served is what Serve made (datapath.Served).
type Served struct {
	Exposure
	// Checkpoints returns, so far, when each checkpoint was seen, by
	// metric name.
	Checkpoints func() map[string]time.Time
	// Fail makes the server of site fail (its pod deleted).
	Fail func(ctx context.Context, site testbed.Site) error
}

// controlPorts hands each control-plane trial a service port of its own,
// so that a trial never reaches what an earlier one left in a relay's
// connection pool or a kernel's TIME-WAIT.
var controlPorts atomic.Uint32

// controlPortBase and controlPortCount bound the ports controlPort hands
// out: above agent.DefaultPort, below the relays' 17100.
const (
	controlPortBase  = 7200
	controlPortCount = 2000
)

// controlPort returns the next fresh service port.
func controlPort() int {
	return controlPortBase + int(controlPorts.Add(1)%controlPortCount)
}

// killProcess kills p at once (SIGKILL to its process group, as a crash
// would) and waits for it; a process without a PID here is stopped.
func killProcess(p testbed.Process) {
	if pid, ok := testbed.PIDOf(p); ok {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = p.Stop(0)
}

// lastJSONLine decodes the last line of out into v.
func lastJSONLine(out string, v any) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		return fmt.Errorf("probe said %q: %w", out, err)
	}
	return nil
}

// undoWithin runs undo, bounded by 30 s, even when the trial's context
// has ended.
func undoWithin(e *Exposure) error {
	if e == nil || e.Undo == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.Undo(ctx)
}
