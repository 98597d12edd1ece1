// Package datapath defines how sites are connected for a trial: the
// Datapath interface, the Link a setup returns, and the built-in datapaths.
// It knows nothing of workloads.
package datapath

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// ErrNotSupported is testbed.ErrNotSupported: this machine lacks what the
// datapath needs. Errors wrap it with the reason.
var ErrNotSupported = testbed.ErrNotSupported

// Datapath connects the sites of a testbed.
type Datapath interface {
	// Setup builds the datapath on tb and returns how sites reach each
	// other through it. On error, Setup has removed what it built. The
	// returned Link's Close must be called before tb.Close.
	Setup(ctx context.Context, tb testbed.Testbed) (*Link, error)
}

// Checker is implemented by datapaths that can tell, before anything is
// built, whether this machine can run them. Check returns nil or an error
// wrapping ErrNotSupported that says what is missing and what provides it.
type Checker interface {
	Check(ctx context.Context) error
}

// Link is a datapath in place.
type Link struct {
	// Target returns the address a client in site from dials to reach
	// port on site to.
	Target func(from, to testbed.Site, port int) netip.AddrPort
	// Components are the processes (or the kernel) that carry the traffic.
	Components []results.Component
	// Alive, when set, returns nil while every daemon of the datapath runs,
	// else an error naming the datapath, the daemon, its site and its last
	// log lines. The runner calls it after each trial; an error fails the
	// trial.
	Alive func() error
	// Close removes what Setup built. It is safe to call once; the testbed's
	// own Close removes namespaces (and links in them) regardless.
	Close func(context.Context) error
}

// Info describes a registered datapath.
type Info struct {
	// Name is the datapath's name in scenario files.
	Name string
	// Summary is one line for `spanperf list`.
	Summary string
	// Options are the options the datapath accepts in a scenario entry.
	Options []scenario.Field
	// New makes the datapath from its options (defaults already applied).
	New func(opts map[string]any) (Datapath, error)
}

// Func adapts a setup function to the Datapath interface.
type Func func(ctx context.Context, tb testbed.Testbed) (*Link, error)

// Setup calls f.
func (f Func) Setup(ctx context.Context, tb testbed.Testbed) (*Link, error) { return f(ctx, tb) }

// UnderlayTarget dials the destination site's underlay address.
func UnderlayTarget(_, to testbed.Site, port int) netip.AddrPort {
	return netip.AddrPortFrom(to.Addr(), uint16(port))
}

// KernelComponent names the kernel as the component that carries traffic
// (veth, routing, in-kernel tunnels: accounted as softirq time).
func KernelComponent() results.Component {
	return results.Component{Name: "kernel", Role: "kernel"}
}

func intOpt(opts map[string]any, name string) int {
	switch v := opts[name].(type) {
	case int64:
		return int(v)
	case int:
		return v
	case float64:
		return int(v)
	}
	return 0
}

func notSupported(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotSupported)
}
