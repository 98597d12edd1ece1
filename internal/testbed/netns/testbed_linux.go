// Package netns builds a local testbed: each site is a Linux network
// namespace, and a "wan" namespace routes between them over veth links, with
// optional tbf shaping and a settable MTU. Addresses come from 198.18.0.0/15
// (RFC 2544's benchmarking range): site i's underlay is 198.18.(i+1).0/24,
// the site at .2 and the wan router at .1. In the gateway topology each
// site also has a node namespace behind it on 198.19.(100+i).0/24 (the
// site, its gateway, at .1 and the node at .2).
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Spec describes a local testbed. Its zero value (plus Run) is two sites
// joined by unshaped 1500-byte links.
type Spec struct {
	// Run is the run ID; it names namespaces and the ledger. Required.
	Run string
	// Sites is the number of sites; 0 means 2.
	Sites int
	// MTU of the underlay links; 0 means 1500.
	MTU int
	// RateBPS, when non-zero, shapes each site's link with tbf to this many
	// bits per second in each direction.
	RateBPS int64
	// Detach leaves processes running when the controller exits (`spanperf up`).
	Detach bool
	// Topology is testbed.TopologyMesh, TopologyHub or TopologyChain
	// (workloads run in the sites; the topology tells datapaths which
	// sites to join directly), or testbed.TopologyGateway (each site gets
	// a node namespace behind it, and the site becomes the node's
	// gateway); "" and testbed.TopologyDirect mean mesh. The underlay
	// routes between every pair of sites in all of them.
	Topology string
}

// MaxGatewaySites is the most sites the gateway topology can number: node
// subnets run from 198.19.100.0/24 to 198.19.255.0/24.
const MaxGatewaySites = 156

// Normalize fills defaults.
func (s *Spec) Normalize() {
	if s.Sites == 0 {
		s.Sites = 2
	}
	if s.MTU == 0 {
		s.MTU = 1500
	}
	if s.Topology == "" || s.Topology == testbed.TopologyDirect {
		s.Topology = testbed.TopologyMesh
	}
}

// Validate reports a spec that cannot be built.
func (s Spec) Validate() error {
	switch {
	case s.Run == "":
		return errors.New("netns testbed: empty run id")
	case s.Sites < 1 || s.Sites > 200:
		return fmt.Errorf("netns testbed: %d sites (want 1..200)", s.Sites)
	case s.MTU < 576 || s.MTU > 65535:
		return fmt.Errorf("netns testbed: mtu %d (want 576..65535)", s.MTU)
	case s.RateBPS < 0:
		return fmt.Errorf("netns testbed: negative rate")
	case !slices.Contains([]string{"", testbed.TopologyMesh, testbed.TopologyDirect, testbed.TopologyGateway, testbed.TopologyHub, testbed.TopologyChain}, s.Topology):
		return fmt.Errorf("netns testbed: topology %q (want %s, %s, %s or %s)", s.Topology, testbed.TopologyMesh, testbed.TopologyHub, testbed.TopologyChain, testbed.TopologyGateway)
	case s.Topology == testbed.TopologyGateway && s.Sites > MaxGatewaySites:
		return fmt.Errorf("netns testbed: %d sites in topology gateway (want at most %d)", s.Sites, MaxGatewaySites)
	}
	return nil
}

// Testbed is a live local testbed. It implements testbed.Testbed.
type Testbed struct {
	spec   Spec
	ledger *testbed.Ledger
	tmp    string
	wan    *Site
	// wanState is the WAN emulation ShapeWAN set.
	wanState wanState
	sites    []*Site
	nodes    []*Site // gateway topology: nodes[i] is behind sites[i]
	extra    []*Site

	mu     sync.Mutex
	procs  []*process
	closed bool
}

var _ testbed.Testbed = (*Testbed)(nil)

// Site is a network namespace. It implements testbed.Site.
type Site struct {
	name   string
	nsName string
	ns     vnetns.NsHandle
	nl     *netlink.Handle
	addr   netip.Prefix
	tb     *Testbed
	// Gateway topology: a site's node behind it, and a node's gateway.
	node, gateway *Site
}

var _ testbed.Site = (*Site)(nil)

// NamespaceName returns the name of the namespace of site in run.
func NamespaceName(run, site string) string { return Prefix + run + "-" + site }

// SiteName returns the name of the i-th site (testbed.SiteName).
func SiteName(i int) string { return testbed.SiteName(i) }

// UnderlayPrefix is the underlay address of site i (0-based), with its /24.
func UnderlayPrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 2}), 24)
}

func gatewayAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i + 1), 1}) }

// NodePrefix is the subnet behind site i (0-based) in the gateway topology,
// 198.19.(100+i).0/24: the site (the node's gateway) at .1, the node at .2.
func NodePrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(100 + i), 0}), 24)
}

// nodeAddr is the address of the node (host 2) or of its gateway (host 1)
// on the subnet behind site i.
func nodeAddr(i int, host byte) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(100 + i), host}), 24)
}

// New builds the testbed. On error, everything built so far is removed.
func New(ctx context.Context, spec Spec) (_ *Testbed, err error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	tb := &Testbed{spec: spec}
	tb.ledger, err = testbed.NewLedger(spec.Run, spec.Detach)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tb.Close()
		}
	}()
	tb.tmp = filepath.Join(os.TempDir(), "spanperf-"+spec.Run)
	if err := tb.ledger.Add(testbed.Entry{Kind: testbed.KindPath, Path: tb.tmp}); err != nil {
		return nil, err
	}
	if err := os.Mkdir(tb.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("netns testbed: %w", err)
	}
	if tb.wan, err = tb.AddNamespace("wan"); err != nil {
		return nil, err
	}
	if err := tb.wan.Do(func() error { return writeSysctl("net.ipv4.ip_forward", "1") }); err != nil {
		return nil, err
	}
	for i := 0; i < spec.Sites; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := tb.AddNamespace(SiteName(i))
		if err != nil {
			return nil, err
		}
		s.addr = UnderlayPrefix(i)
		tb.sites = append(tb.sites, s)
		if err := tb.wire(i, s); err != nil {
			return nil, fmt.Errorf("netns testbed: site %s: %w", s.name, err)
		}
		if spec.Topology == testbed.TopologyGateway {
			if err := tb.addNode(i, s); err != nil {
				return nil, fmt.Errorf("netns testbed: node behind site %s: %w", s.name, err)
			}
		}
	}
	return tb, nil
}

// addNode creates the node namespace "<site>-node" behind site i and joins
// it to the site, which becomes its gateway, with a veth pair: "eth0" in
// the node, "node0" in the site. The node's default route points at the
// site, which forwards. Nothing else routes to the node's subnet: a
// datapath must carry it between sites.
func (tb *Testbed) addNode(i int, gw *Site) error {
	n, err := tb.AddNamespace(gw.name + "-node")
	if err != nil {
		return err
	}
	n.addr = nodeAddr(i, 2)
	n.gateway, gw.node = gw, n
	tb.nodes = append(tb.nodes, n)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "node0", MTU: tb.spec.MTU},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(n.ns)),
	}
	if err := gw.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	gl, err := gw.nl.LinkByName("node0")
	if err != nil {
		return err
	}
	nl, err := n.nl.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := addrAdd(gw.nl, gl, nodeAddr(i, 1)); err != nil {
		return err
	}
	if err := addrAdd(n.nl, nl, n.addr); err != nil {
		return err
	}
	if err := n.nl.LinkSetMTU(nl, tb.spec.MTU); err != nil {
		return fmt.Errorf("mtu: %w", err)
	}
	if err := gw.nl.LinkSetUp(gl); err != nil {
		return fmt.Errorf("link up: %w", err)
	}
	if err := n.nl.LinkSetUp(nl); err != nil {
		return fmt.Errorf("link up: %w", err)
	}
	if err := gw.Do(func() error { return writeSysctl("net.ipv4.ip_forward", "1") }); err != nil {
		return err
	}
	gwAddr := nodeAddr(i, 1).Addr()
	if err := n.nl.RouteAdd(&netlink.Route{LinkIndex: nl.Attrs().Index, Gw: net.IP(gwAddr.AsSlice())}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}

// AddNamespace creates one more namespace in the testbed (a gateway or node
// namespace of a datapath's topology), with loopback up and host tuning
// applied; Close removes it. It is not one of Sites.
func (tb *Testbed) AddNamespace(name string) (*Site, error) {
	nsName := NamespaceName(tb.spec.Run, name)
	if err := tb.ledger.Add(testbed.Entry{Kind: testbed.KindNetns, Name: nsName}); err != nil {
		return nil, err
	}
	h, err := newNamed(nsName)
	if err != nil {
		return nil, err
	}
	s := &Site{name: name, nsName: nsName, ns: h, tb: tb}
	tb.mu.Lock()
	tb.extra = append(tb.extra, s)
	tb.mu.Unlock()
	if s.nl, err = netlink.NewHandleAt(h); err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", nsName, err)
	}
	lo, err := s.nl.LinkByName("lo")
	if err == nil {
		err = s.nl.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: loopback: %w", nsName, err)
	}
	err = s.Do(func() error {
		// Many short connections (crr) must not run out of ports, and each
		// trial starts without metrics cached from the one before. The
		// ports that servers and datapaths listen on mid-run (ReservedPorts)
		// are never a client's: a busy client (failover's connection per
		// millisecond) took one, and the listener started next failed to
		// bind it.
		return errors.Join(
			writeSysctl("net.ipv4.tcp_tw_reuse", "1"),
			writeSysctl("net.ipv4.ip_local_port_range", "1024 65000"),
			writeSysctl("net.ipv4.ip_local_reserved_ports", ReservedPorts),
			writeSysctl("net.ipv4.tcp_no_metrics_save", "1"),
		)
	})
	return s, err
}

// ReservedPorts are the ports a site's kernel never picks for a client's
// connection (net.ipv4.ip_local_reserved_ports): the agents' service ports
// (agent.DefaultPort and the control-plane workloads' fresh ports above
// it) and the datapaths' listeners, some started mid-run (exposures).
const ReservedPorts = "7000-9999,15000-19999"

// wire joins site i to the wan router with a veth pair, addresses, routes and shaping.
func (tb *Testbed) wire(i int, s *Site) error {
	wanDev := "to-" + s.name
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: wanDev, MTU: tb.spec.MTU},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(s.ns)),
	}
	if err := tb.wan.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	wl, err := tb.wan.nl.LinkByName(wanDev)
	if err != nil {
		return err
	}
	sl, err := s.nl.LinkByName("eth0")
	if err != nil {
		return err
	}
	gw := gatewayAddr(i)
	if err := addrAdd(tb.wan.nl, wl, netip.PrefixFrom(gw, 24)); err != nil {
		return err
	}
	if err := addrAdd(s.nl, sl, s.addr); err != nil {
		return err
	}
	if err := s.nl.LinkSetMTU(sl, tb.spec.MTU); err != nil {
		return fmt.Errorf("mtu: %w", err)
	}
	for _, p := range []struct {
		h *netlink.Handle
		l netlink.Link
	}{{tb.wan.nl, wl}, {s.nl, sl}} {
		if err := p.h.LinkSetUp(p.l); err != nil {
			return fmt.Errorf("link up: %w", err)
		}
		if tb.spec.RateBPS > 0 {
			if err := addTBF(p.h, p.l, tb.spec.RateBPS); err != nil {
				return err
			}
		}
	}
	return s.nl.RouteAdd(&netlink.Route{LinkIndex: sl.Attrs().Index, Gw: net.IP(gw.AsSlice())})
}

func addrAdd(h *netlink.Handle, l netlink.Link, p netip.Prefix) error {
	ipn := &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, l.Attrs().Name, err)
	}
	return nil
}

// addTBF shapes l's egress to bps bits/s with a token bucket. The burst holds
// at least one 64 KiB GSO segment or 1 ms at rate, and the queue 50 ms at rate.
func addTBF(h *netlink.Handle, l netlink.Link, bps int64) error {
	bytesPerSec := uint64(bps / 8)
	burst := uint32(max(64*1024, bytesPerSec/1000))
	limit := uint32(max(uint64(burst)*2, bytesPerSec/20))
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       bytesPerSec,
		Limit:      limit,
		Buffer:     netlink.Xmittime(bytesPerSec, burst),
	}
	if err := h.QdiscAdd(q); err != nil {
		return fmt.Errorf("tbf on %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// Sites returns the sites in order.
func (tb *Testbed) Sites() []testbed.Site {
	out := make([]testbed.Site, len(tb.sites))
	for i, s := range tb.sites {
		out[i] = s
	}
	return out
}

// LocalSites returns the sites as *Site, for datapaths that need netlink.
// In the gateway topology these are the gateways: datapaths build their
// tunnels in them exactly as in the direct topology, and route each peer's
// Behind prefixes through the tunnel.
func (tb *Testbed) LocalSites() []*Site { return tb.sites }

// Topology is testbed.TopologyMesh, TopologyHub, TopologyChain or
// TopologyGateway.
func (tb *Testbed) Topology() string { return tb.spec.Topology }

// Node returns the node behind site in the gateway topology, nil in the
// direct topology. A node is a *Site: Exec starts processes in it, Addr is
// its address on the subnet behind its gateway.
func (tb *Testbed) Node(site *Site) *Site { return site.node }

// Nodes returns the nodes in site order; empty in the direct topology.
func (tb *Testbed) Nodes() []*Site { return tb.nodes }

// WAN returns the router namespace between the sites.
func (tb *Testbed) WAN() *Site { return tb.wan }

// Spec returns the spec the testbed was built from, normalized.
func (tb *Testbed) Spec() Spec { return tb.spec }

// TempDir is private to the testbed and removed by Close.
func (tb *Testbed) TempDir() string { return tb.tmp }

// Ledger returns the run's ledger.
func (tb *Testbed) Ledger() *testbed.Ledger { return tb.ledger }

// Close stops every process, deletes every namespace (and with them every
// link), removes the temp dir and, unless detached, the ledger. A detached
// testbed's Close only releases handles: `spanperf down` removes it.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	if tb.closed {
		tb.mu.Unlock()
		return nil
	}
	tb.closed = true
	procs := tb.procs
	extra := tb.extra
	tb.mu.Unlock()
	if tb.spec.Detach {
		for _, s := range extra {
			s.release()
		}
		return nil
	}
	var errs []error
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(2 * time.Second) }()
	}
	wg.Wait()
	for i := len(extra) - 1; i >= 0; i-- {
		extra[i].release()
		if err := DeleteNamed(extra[i].nsName); err != nil {
			errs = append(errs, fmt.Errorf("delete netns %s: %w", extra[i].nsName, err))
		}
	}
	if tb.tmp != "" {
		if err := os.RemoveAll(tb.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, tb.ledger.Remove())
	}
	return errors.Join(errs...)
}

func (s *Site) release() {
	if s.nl != nil {
		s.nl.Close()
		s.nl = nil
	}
	if s.ns.IsOpen() {
		s.ns.Close()
	}
}

// Name is the site's short name.
func (s *Site) Name() string { return s.name }

// Behind returns the node subnets behind the site: the prefixes a datapath
// must route to this site through its tunnel. It is empty in the direct
// topology, and for a node.
func (s *Site) Behind() []netip.Prefix {
	if s.node == nil {
		return nil
	}
	return []netip.Prefix{s.node.addr.Masked()}
}

// Gateway returns the site a node sits behind; nil for anything but a node.
func (s *Site) Gateway() *Site { return s.gateway }

// Namespace is the name of the site's network namespace (for `ip netns exec`).
func (s *Site) Namespace() string { return s.nsName }

// Addr is the site's underlay address; for a node, its address on the
// subnet behind its gateway (198.19.(100+i).2).
func (s *Site) Addr() netip.Addr { return s.addr.Addr() }

// Prefix is Addr with its prefix length.
func (s *Site) Prefix() netip.Prefix { return s.addr }

// Netlink is a netlink handle inside the site's namespace, owned by the site.
func (s *Site) Netlink() *netlink.Handle { return s.nl }

// Handle is the site's namespace handle, owned by the site.
func (s *Site) Handle() vnetns.NsHandle { return s.ns }

// Do runs fn on an OS thread inside the site's namespace. Sockets fn opens
// stay in the namespace; processes it starts are born there.
func (s *Site) Do(fn func() error) error { return inNS(s.ns, fn) }

// Exec starts cmd inside the site, in its own process group. Unless
// cmd.Detach, the process is killed if the controller dies.
func (s *Site) Exec(ctx context.Context, c testbed.Command) (testbed.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := exec.LookPath(c.Path)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", c.Name, s.name, err)
	}
	cmd := exec.Command(path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin, cmd.Stdout = c.Stdin, c.Stdout
	p := &process{cmd: cmd, name: c.Name + "@" + s.name, done: make(chan struct{})}
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		p.tail = testbed.NewTail(4096)
		cmd.Stderr = p.tail
	}
	if c.Detach || s.tb.spec.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	s.tb.mu.Lock()
	closed := s.tb.closed
	s.tb.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%s: testbed closed", p.name)
	}
	if err := s.Do(cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	_ = s.tb.ledger.AddPID(cmd.Process.Pid)
	go p.wait()
	s.tb.mu.Lock()
	s.tb.procs = append(s.tb.procs, p)
	s.tb.mu.Unlock()
	return p, nil
}
