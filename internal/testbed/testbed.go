// Package testbed defines sites, the underlay between them, and the ledger
// of everything a run creates so that `spanperf clean` can sweep a crashed
// run. It knows nothing of datapaths or workloads.
package testbed

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// ErrNotSupported is returned (wrapped, with the reason) when this machine
// lacks a kernel feature or program that something needs.
var ErrNotSupported = errors.New("not supported on this machine")

// Topologies: which sites a datapath joins directly (mesh, hub, chain) and
// where workloads run relative to where datapaths end their tunnels
// (gateway).
const (
	// TopologyMesh joins every pair of sites directly, with workloads in
	// the sites themselves, where the datapath ends its tunnels. It is the
	// default.
	TopologyMesh = "mesh"
	// TopologyDirect is the old name of TopologyMesh, still accepted;
	// testbeds and records say mesh.
	TopologyDirect = "direct"
	// TopologyGateway is the mesh with workloads in a node behind each
	// site: the site is the node's gateway, where the datapath ends its
	// tunnels, and cross-site traffic goes node → gateway → tunnel →
	// gateway → node (Submariner's shape).
	TopologyGateway = "gateway"
	// TopologyHub joins every other site (a spoke) to the first site (the
	// hub) only: spoke-to-spoke traffic crosses the hub (Skupper's interior
	// router, a hub-and-spoke VPN).
	TopologyHub = "hub"
	// TopologyChain joins each site to the next in site order (a–b–c…):
	// traffic between sites that are not neighbours crosses every site
	// between them.
	TopologyChain = "chain"
)

// TopologyPath returns the sites (indexes into the testbed's site order)
// that traffic from site from to site to crosses in topology, both ends
// included: [from, to] in the mesh (and gateway, and direct), [from, 0, to]
// between two spokes of the hub, and every site in between along the
// chain. It returns nil for an unknown topology or a site outside 0..n-1.
func TopologyPath(topology string, n, from, to int) []int {
	if from < 0 || to < 0 || from >= n || to >= n {
		return nil
	}
	if from == to {
		return []int{from}
	}
	switch topology {
	case "", TopologyMesh, TopologyDirect, TopologyGateway:
		return []int{from, to}
	case TopologyHub:
		if from == 0 || to == 0 {
			return []int{from, to}
		}
		return []int{from, 0, to}
	case TopologyChain:
		step := 1
		if to < from {
			step = -1
		}
		var p []int
		for i := from; i != to+step; i += step {
			p = append(p, i)
		}
		return p
	}
	return nil
}

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
	// Stdin, when not nil, is the process's standard input.
	Stdin io.Reader
	// Agent marks Path as the spanperf binary itself (`spanperf agent
	// ...`, see agent.Command): a site that is a pod runs the image's own
	// copy in its place.
	Agent bool
	// Server runs the command in a pod site's server container, from the
	// run's server image (see PodSite), where Path is looked up in the
	// image's PATH (or, with Agent, a copy of spanperf runs). Without it
	// a pod site runs only the agent. Local sites ignore it.
	Server bool
}

// PodSite is implemented by sites that are pods: their processes and
// files are not on the controller's machine, and programs other than the
// agent (nginx, PostgreSQL) run in the pod's server container, from the
// server image the run names.
type PodSite interface {
	Site
	// ServerImage is the image of the site's server container; "" when
	// the run named none (then the site runs only the agent).
	ServerImage() string
	// Where names the site's pod and the container a command with the
	// given Server setting runs in ("context c: pod ns/name, container
	// server"), for errors.
	Where(server bool) string
}

// Target is what a client dials: a host (an IP address, or a DNS name
// resolved where the client runs, as a Kubernetes service name is inside
// the client's pod) and a port.
type Target struct {
	// Host is an IP address or a DNS name.
	Host string
	// Port is the TCP port.
	Port int
}

// AddrTarget is the target of an IP address and port.
func AddrTarget(ap netip.AddrPort) Target {
	return Target{Host: ap.Addr().Unmap().String(), Port: int(ap.Port())}
}

// String is HOST:PORT, with an IPv6 address in brackets.
func (t Target) String() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// AddrPort is the target as an address and port, when Host is an IP
// address.
func (t Target) AddrPort() (netip.AddrPort, bool) {
	a, err := netip.ParseAddr(t.Host)
	if err != nil || t.Port <= 0 || t.Port > 65535 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, uint16(t.Port)), true
}

// Process is a process started in a site. The site owns it: Testbed.Close
// stops every process still running.
type Process interface {
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

// LocalProcess is a process on the controller's machine, with a PID in
// its PID namespace (a process in a network namespace). A process in a pod
// has none: what it costs is read on its node (the node probe).
type LocalProcess interface {
	Process
	// PID is the process ID in the controller's PID namespace.
	PID() int
}

// PIDOf returns p's PID when p is a LocalProcess.
func PIDOf(p Process) (int, bool) {
	if lp, ok := p.(LocalProcess); ok {
		return lp.PID(), true
	}
	return 0, false
}

// Site is where processes run: a network namespace locally, a pod in a cluster.
type Site interface {
	// Name is the site's short name, e.g. "a".
	Name() string
	// Exec starts cmd inside the site. ctx bounds only the start, not the
	// process's life: stop it with Process.Stop.
	Exec(ctx context.Context, cmd Command) (Process, error)
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

// SiteName returns the name of the i-th (0-based) local site: a, b, ... z,
// s26, s27, ...
func SiteName(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return "s" + strconv.Itoa(i)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// stdout and stderr) and a reader.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written.
func (b *SyncBuffer) String() string { return string(b.Bytes()) }
