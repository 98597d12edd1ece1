package datapath

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Daemon is a datapath process running in a site.
type Daemon struct {
	// Datapath, Name and Role describe it in errors and components.
	Datapath, Name, Role string
	// Site is where it runs.
	Site testbed.Site
	// Process is the running process.
	Process testbed.Process
}

// StartDaemon starts cmd in site and waits until ready returns nil (polled
// every 20 ms) or timeout passes. A daemon that exits or is not ready in time
// is stopped, and the error names the datapath, the daemon, the site and its
// last log lines. ready may be nil.
func StartDaemon(ctx context.Context, dp, role string, site testbed.Site, cmd testbed.Command, ready func() error, timeout time.Duration) (*Daemon, error) {
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: start %s on site %s: %w", dp, cmd.Name, site.Name(), err)
	}
	d := &Daemon{Datapath: dp, Name: cmd.Name, Role: role, Site: site, Process: p}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.Done():
			return nil, d.exitError()
		default:
		}
		var rerr error
		if ready != nil {
			rerr = ready()
		}
		if rerr == nil {
			return d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("%s: %s on site %s not ready after %s: %v%s", dp, d.Name, site.Name(), timeout, rerr, tail(p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *Daemon) exitError() error {
	return fmt.Errorf("%s: %s on site %s exited: %v%s", d.Datapath, d.Name, d.Site.Name(), d.Process.Wait(), tail(d.Process))
}

func tail(p testbed.Process) string {
	if t := p.Tail(); t != "" {
		return "\nlast log lines:\n" + t
	}
	return ""
}

// Alive returns nil while the daemon runs, else an error with its last log lines.
func (d *Daemon) Alive() error {
	select {
	case <-d.Process.Done():
		return d.exitError()
	default:
		return nil
	}
}

// Component describes the daemon as a component of the path.
func (d *Daemon) Component() results.Component {
	return results.Component{Name: d.Name + "@" + d.Site.Name(), Role: d.Role, Site: d.Site.Name(), PID: pidOf(d.Process)}
}

// Daemons is the set of daemons of one datapath.
type Daemons []*Daemon

// Alive returns the errors of every daemon that has exited.
func (ds Daemons) Alive() error {
	var errs []error
	for _, d := range ds {
		errs = append(errs, d.Alive())
	}
	return errors.Join(errs...)
}

// Components lists the daemons as components.
func (ds Daemons) Components() []results.Component {
	out := make([]results.Component, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Component())
	}
	return out
}

// Stop stops every daemon (SIGTERM, then SIGKILL after grace).
func (ds Daemons) Stop(grace time.Duration) {
	for _, d := range ds {
		d.Process.Stop(grace)
	}
}

// pidOf is p's PID, 0 when p is not a local process.
func pidOf(p testbed.Process) int {
	pid, _ := testbed.PIDOf(p)
	return pid
}
