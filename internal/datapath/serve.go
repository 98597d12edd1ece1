package datapath

import (
	"context"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Served is a service whose servers the datapath runs itself (on
// Kubernetes: a pod per site, created from the agent image, and the
// objects that export it), made reachable from a client's site.
type Served struct {
	Exposure
	// Checkpoints returns, so far, when each checkpoint the datapath
	// watches for was seen: metric name (results.PodReadySeconds, ...)
	// to the time. Safe to call at any time, from any goroutine.
	Checkpoints func() map[string]time.Time
	// Fail makes the server of site fail as deleting it would (on
	// Kubernetes: its pod deleted); it returns once the deletion is
	// accepted. Undo removes what is left.
	Fail func(ctx context.Context, site testbed.Site) error
}

// ServeFunc starts a server listening on port in each site of to, each
// answering with its site's name, exposes it through the datapath's own
// mechanism and routes clients in site from to them: to one site (a new
// server appears: discovery), or to two, preferring to[0] and moving to
// the other when the one in use loses its server (failover). It returns
// once what the client dials is known, without waiting for the servers
// to answer; the caller times that. On error it has removed what it
// built.
type ServeFunc func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Served, error)
