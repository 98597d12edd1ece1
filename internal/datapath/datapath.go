// Package datapath defines how sites are connected for a trial: the
// Datapath interface, the Link a setup returns, and the built-in datapaths.
// It knows nothing of workloads.
package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// ErrNotSupported is testbed.ErrNotSupported: this machine lacks what the
// datapath needs. Errors wrap it with the reason.
var ErrNotSupported = testbed.ErrNotSupported

// ErrUnconfigured is returned (wrapped) by Check of a datapath that the
// scenario must define (custom) when it has not been given what it needs.
// It says nothing about this machine.
var ErrUnconfigured = errors.New("the scenario defines this datapath (up, target, components)")

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

// GatewayChecker is implemented by datapaths that can run in the gateway
// topology (testbed.TopologyGateway): they build their tunnels in the sites,
// which are then the gateways, and route the prefixes behind each peer
// (netns Site.Behind) through them. CheckGateway returns nil, or why the
// datapath with its options cannot. A datapath that does not implement it
// runs only in the direct topology.
type GatewayChecker interface {
	CheckGateway() error
}

// SiteLimiter is implemented by datapaths that join a bounded number of
// sites (a point-to-point tunnel joins two); the others join any number.
type SiteLimiter interface {
	MaxSites() int
}

// CheckSites tells, before anything is built, whether dp (registered as
// name) can join sites sites: nil, or an error naming the most it joins.
func CheckSites(name string, dp Datapath, sites int) error {
	if l, ok := dp.(SiteLimiter); ok && sites > l.MaxSites() {
		return fmt.Errorf("%s joins at most %d sites; the scenario has %d", name, l.MaxSites(), sites)
	}
	return nil
}

// TopologyLister is implemented by datapaths that say which link graphs
// they build: testbed.TopologyMesh, TopologyHub, TopologyChain. A datapath
// that does not implement it builds the mesh only. (The gateway topology,
// a mesh with workloads behind the sites, is GatewayChecker's.)
type TopologyLister interface {
	Topologies() []string
}

// Topologies returns the topologies dp supports: the mesh, the gateway
// topology when dp is a GatewayChecker that accepts it, and what a
// TopologyLister adds.
func Topologies(dp Datapath) []string {
	out := []string{testbed.TopologyMesh}
	if l, ok := dp.(TopologyLister); ok {
		out = nil
		for _, t := range l.Topologies() {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	if g, ok := dp.(GatewayChecker); ok && g.CheckGateway() == nil {
		out = append(out, testbed.TopologyGateway)
	}
	return out
}

// CheckTopology tells, before anything is built, whether dp (registered as
// name) can run in topology: nil, or an error
// "topology T: not supported by NAME[: reason]" (and, for hub and chain,
// what NAME supports).
func CheckTopology(name string, dp Datapath, topology string) error {
	switch topology {
	case "", testbed.TopologyDirect, testbed.TopologyMesh:
		return nil
	case testbed.TopologyGateway:
		g, ok := dp.(GatewayChecker)
		if !ok {
			return fmt.Errorf("topology %s: not supported by %s", topology, name)
		}
		if err := g.CheckGateway(); err != nil {
			return fmt.Errorf("topology %s: not supported by %s: %w", topology, name, err)
		}
		return nil
	case testbed.TopologyHub, testbed.TopologyChain:
		if ts := Topologies(dp); !slices.Contains(ts, topology) {
			return fmt.Errorf("topology %s: not supported by %s (it supports %s)", topology, name, strings.Join(ts, ", "))
		}
		return nil
	}
	return fmt.Errorf("unknown topology %q", topology)
}

// TopologyOf returns tb's topology: what its Topology method says (with
// testbed.TopologyDirect read as its new name, mesh), else
// testbed.TopologyMesh.
func TopologyOf(tb testbed.Testbed) string {
	if t, ok := tb.(interface{ Topology() string }); ok && t.Topology() != "" && t.Topology() != testbed.TopologyDirect {
		return t.Topology()
	}
	return testbed.TopologyMesh
}

// Build sets dp (registered as name) up on tb, after CheckTopology has
// accepted it for tb's topology. In the gateway topology it marks as
// Gateway the components in tb's sites (the gateways) and the kernel's
// share. The runner, the CLI and datapathtest build datapaths through it.
func Build(ctx context.Context, name string, dp Datapath, tb testbed.Testbed) (*Link, error) {
	topo := TopologyOf(tb)
	if err := CheckTopology(name, dp, topo); err != nil {
		return nil, err
	}
	link, err := dp.Setup(ctx, tb)
	if err != nil {
		return nil, err
	}
	if topo == testbed.TopologyGateway {
		gateways := map[string]bool{"": true}
		for _, s := range tb.Sites() {
			gateways[s.Name()] = true
		}
		cs := make([]results.Component, len(link.Components))
		for i, c := range link.Components {
			c.Gateway = gateways[c.Site]
			cs[i] = c
		}
		link.Components = cs
	}
	return link, nil
}

// Link is a datapath in place.
type Link struct {
	// Target returns what a client in site from dials to reach port on
	// site to: an address, or a name resolved in the client's site.
	Target func(from, to testbed.Site, port int) testbed.Target
	// Components are the processes (or the kernel) that carry the traffic.
	Components []results.Component
	// Workloads, when set, returns where the workloads of site run: a
	// namespace the datapath made behind it (a pod behind a CNI bridge).
	// Nil means in the site itself. Target still takes the sites.
	Workloads func(site testbed.Site) testbed.Site
	// Alive, when set, returns nil while every daemon of the datapath runs,
	// else an error naming the datapath, the daemon, its site and its last
	// log lines. The runner calls it after each trial; an error fails the
	// trial.
	Alive func() error
	// Refresh, when set, finds the components again after their pods were
	// replaced (a rollout after sizing patched their Deployment): it
	// updates Components and Alive in place. The runner calls it after
	// each patch and restore, between trials.
	Refresh func(ctx context.Context) error
	// Expose, when set, exposes a service started after setup (see
	// Exposer): port on site to, reachable from every other site.
	Expose ExposeFunc
	// Redundant, when set, routes a client in one site to a service
	// served in several (see Redundancer).
	Redundant RedundantFunc
	// Serve, when set, runs the servers of discovery and failover itself
	// and exposes them (Kubernetes: new pods and their Services); those
	// workloads then use it in place of Expose and Redundant.
	Serve ServeFunc
	// Close removes what Setup built. It is safe to call once; the testbed's
	// own Close removes namespaces (and links in them) regardless.
	Close func(context.Context) error
	// MaxConnections, when > 0, is the most TCP connections at once the
	// datapath carries from a client to a server (a relay's connection
	// limit), and MaxConnectionsBy says what sets it; 0 means no limit of
	// its own is known.
	MaxConnections   int
	MaxConnectionsBy string
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
	// Components declares, before anything is built, every component the
	// datapath with options opts may have on a testbed of sites sites, as
	// Link.Components will name them, so a scenario's limits can be checked
	// at parse time. Nil means the kernel only.
	Components func(opts map[string]any, sites int) []scenario.Component
	// CheckOptions, when set, checks at parse time that the options make
	// sense together (beyond each value's kind); errors that are
	// scenario.FieldErrors name the key below the datapath entry.
	CheckOptions func(opts map[string]any) error
	// Doctor lists option sets `spanperf doctor` checks besides the
	// defaults, each on a line of its own: an implementation or mode with
	// a preflight of its own.
	Doctor []map[string]any
	// Kube marks an exposure adapter: the datapath exposes a server on
	// Kubernetes sites (scenario sites with a context) and runs only on
	// them; the others run only on local sites.
	Kube bool
}

// Func adapts a setup function to the Datapath interface.
type Func func(ctx context.Context, tb testbed.Testbed) (*Link, error)

// Setup calls f.
func (f Func) Setup(ctx context.Context, tb testbed.Testbed) (*Link, error) { return f(ctx, tb) }

// UnderlayTarget dials the destination site's underlay address.
func UnderlayTarget(_, to testbed.Site, port int) netip.AddrPort {
	return netip.AddrPortFrom(siteAddr(to), uint16(port))
}

// AddrTargets adapts a target function of a local datapath, which
// answers with an address, to Link.Target.
func AddrTargets(f func(from, to testbed.Site, port int) netip.AddrPort) func(from, to testbed.Site, port int) testbed.Target {
	return func(from, to testbed.Site, port int) testbed.Target { return testbed.AddrTarget(f(from, to, port)) }
}

// siteAddr is a local site's underlay address. Local datapaths run only
// on local testbeds (the runner and Build refuse the rest), whose sites
// all have one.
func siteAddr(s testbed.Site) netip.Addr {
	return s.(interface{ Addr() netip.Addr }).Addr()
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
