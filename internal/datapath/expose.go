package datapath

import (
	"context"
	"fmt"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Exposure is a service made reachable through a datapath after its setup.
type Exposure struct {
	// Target returns what a client in site from dials to reach the
	// service.
	Target func(from testbed.Site) testbed.Target
	// Undo removes what exposing built (listeners, routes, peers'
	// allowed IPs, processes). It is safe to call once; Link.Close
	// removes the datapath regardless.
	Undo func(context.Context) error
}

// ExposeFunc exposes the service that listens, or is about to listen, on
// port in site to (on every address) through the datapath's own
// mechanism: a new relay listener and route, a new allowed IP, a route.
// It returns once the datapath has installed what it installs; whether
// the service answers yet is the caller's to find out. On error it has
// removed what it built.
type ExposeFunc func(ctx context.Context, to testbed.Site, port int) (*Exposure, error)

// RedundantFunc routes clients in site from to port served in every site
// of to, preferring to[0] and moving to the next when the one in use
// fails (the datapath's own detection: health checks, a failed dial). The
// caller runs the servers; the Exposure's Target is what a client in
// from dials. On error it has removed what it built.
type RedundantFunc func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Exposure, error)

// Exposer is implemented by datapaths whose Link has Expose. CanExpose
// says, before anything is built, whether this datapath with its options
// will: nil, or why not.
type Exposer interface {
	CanExpose(topology string) error
}

// Redundancer is implemented by datapaths whose Link has Redundant.
// CanRouteRedundant says, before anything is built, whether this datapath
// with its options will: nil, or why not.
type Redundancer interface {
	CanRouteRedundant(topology string) error
}

// Capabilities of a datapath that a workload may need (workload.Info.Needs).
const (
	// NeedExpose: Link.Expose (discovery).
	NeedExpose = "expose"
	// NeedRedundant: Link.Redundant (failover).
	NeedRedundant = "redundant"
)

// CheckCapability tells, before anything is built, whether dp (registered
// as name) has capability need in topology: nil, or an error saying why
// not.
func CheckCapability(name string, dp Datapath, need, topology string) error {
	switch need {
	case NeedExpose:
		e, ok := dp.(Exposer)
		if !ok {
			return fmt.Errorf("%s cannot expose a service after setup", name)
		}
		if err := e.CanExpose(topology); err != nil {
			return fmt.Errorf("%s cannot expose a service after setup: %w", name, err)
		}
	case NeedRedundant:
		r, ok := dp.(Redundancer)
		if !ok {
			return fmt.Errorf("%s cannot route to a service served in two sites", name)
		}
		if err := r.CanRouteRedundant(topology); err != nil {
			return fmt.Errorf("%s cannot route to a service served in two sites: %w", name, err)
		}
	default:
		return fmt.Errorf("unknown datapath capability %q", need)
	}
	return nil
}
