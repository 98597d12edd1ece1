// Package testbed defines sites, the underlay between them, and the ledger
// of everything a run creates so that `spanperf clean` can sweep a crashed
// run. It knows nothing of datapaths or workloads.
package testbed

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"time"
)

// ErrNotSupported is returned (wrapped, with the reason) when this machine
// lacks a kernel feature or program that something needs.
var ErrNotSupported = errors.New("not supported on this machine")

// Topologies: where workloads run relative to where datapaths end their tunnels.
const (
	// TopologyDirect runs workloads in the sites themselves, where the
	// datapath ends its tunnels.
	TopologyDirect = "direct"
	// TopologyGateway runs workloads in a node behind each site: the site is
	// the node's gateway, where the datapath ends its tunnels, and
	// cross-site traffic goes node → gateway → tunnel → gateway → node
	// (Submariner's shape).
	TopologyGateway = "gateway"
)

// Command is a process to start inside a site.
type Command struct {
	// Name labels the process in logs and errors, e.g. "agent-server".
	Name string
	// Path is the program; resolved through PATH when it has no slash.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env is added to the controller's environment.
	Env []string
	// Stdout receives the process's standard output; nil discards it.
	Stdout io.Writer
	// Stderr receives standard error; nil keeps the last lines for errors
	// (see Process.Tail).
	Stderr io.Writer
	// Detach starts the process so that it outlives the controller (for
	// `spanperf up`): it gets its own session and no parent-death signal.
	Detach bool
}

// Process is a process started in a site. The site owns it: Testbed.Close
// stops every process still running.
type Process interface {
	// PID is the process ID in the controller's PID namespace.
	PID() int
	// Wait waits for the process to exit and returns its error, like exec.Cmd.Wait.
	// It may be called from several goroutines.
	Wait() error
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Stop sends SIGTERM to the process group, waits up to grace, then
	// sends SIGKILL, and waits for the exit. Stopping an exited process is a no-op.
	Stop(grace time.Duration) error
	// Tail returns the last lines the process wrote to stderr (when Command.Stderr was nil).
	Tail() string
}

// Site is where processes run: a network namespace locally, a pod in a cluster.
type Site interface {
	// Name is the site's short name, e.g. "a".
	Name() string
	// Exec starts cmd inside the site. ctx bounds only the start, not the
	// process's life: stop it with Process.Stop.
	Exec(ctx context.Context, cmd Command) (Process, error)
	// Addr is the site's address on the underlay.
	Addr() netip.Addr
}

// Testbed is a set of sites joined by an underlay.
type Testbed interface {
	// Sites are the sites in order ("a", "b", ...).
	Sites() []Site
	// TempDir is a directory private to this testbed (mode 0700), removed by Close.
	TempDir() string
	// Ledger records what datapaths create, so that a killed run can be swept.
	Ledger() *Ledger
	// Close stops every process started in the sites and removes everything
	// the testbed created. It is safe to call more than once.
	Close() error
}
