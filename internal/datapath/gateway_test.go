package datapath_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var gatewaySpec = netns.Spec{Topology: testbed.TopologyGateway}

// TestGatewayTestbed checks the gateway topology's shape: a node namespace
// behind each site, its address and default route, nothing routing between
// nodes until a datapath does, and every namespace gone at Close.
func TestGatewayTestbed(t *testing.T) {
	datapathtest.RequireRoot(t)
	spec := gatewaySpec
	spec.Run = runner.NewID()
	tb, err := netns.New(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if tb.Topology() != testbed.TopologyGateway {
		t.Errorf("topology %q", tb.Topology())
	}
	sites := tb.LocalSites()
	if len(tb.Nodes()) != len(sites) {
		t.Fatalf("%d nodes for %d sites", len(tb.Nodes()), len(sites))
	}
	names := netns.ListNamed()
	for i, s := range sites {
		n := tb.Node(s)
		if n == nil || n.Gateway() != s || n.Name() != s.Name()+"-node" {
			t.Fatalf("node behind %s: %v", s.Name(), n)
		}
		if want := netns.NodePrefix(i); !slices.Equal(s.Behind(), []netip.Prefix{want}) || n.Prefix().Masked() != want {
			t.Errorf("site %s: behind %v, node %s; want %s", s.Name(), s.Behind(), n.Prefix(), want)
		}
		if n.Addr() != want2(i) {
			t.Errorf("node %s address %s, want %s", n.Name(), n.Addr(), want2(i))
		}
		if !slices.Contains(names, netns.NamespaceName(spec.Run, n.Name())) {
			t.Errorf("no namespace for node %s in %v", n.Name(), names)
		}
		if len(n.Behind()) != 0 {
			t.Errorf("node %s has something behind it: %v", n.Name(), n.Behind())
		}
	}
	a, b := tb.Node(sites[0]), tb.Node(sites[1])
	// A node reaches its own gateway...
	if _, err := dialFrom(a, netip.AddrPortFrom(netip.MustParseAddr("198.19.100.1"), 9), time.Second); !isRefused(err) {
		t.Errorf("node a → its gateway: %v, want connection refused (reachable, nothing listening)", err)
	}
	// ...but not the other node: without a datapath nothing routes node subnets.
	if _, err := dialFrom(a, netip.AddrPortFrom(b.Addr(), 9), time.Second); err == nil || isRefused(err) {
		t.Errorf("node a → node b without a datapath: %v, want unreachable", err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range netns.ListNamed() {
		if strings.Contains(ns, spec.Run) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
}

func want2(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, byte(100 + i), 2}) }

// TestGatewayCarries runs stream, rr and crr from node a to node b through
// each datapath that supports the gateway topology, and checks that the
// gateway routes node b's subnet into the datapath's device, that the
// server sees the client node's own address, that a TCP exchange makes
// packets leave through that device, and that the components are labelled
// as on the gateway.
func TestGatewayCarries(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts map[string]any
		dev  func(string) bool // the gateway's device towards node b
	}{
		{"native", nil, func(d string) bool { return d == "eth0" }},
		{"vxlan", nil, func(d string) bool { return d == "tun-vxlan" }},
		{"wireguard", nil, func(d string) bool { return strings.HasPrefix(d, "wg") }},
		{"ipsec", nil, func(d string) bool { return strings.HasPrefix(d, "ipsec") }},
		{"ovs-geneve", nil, func(d string) bool { return d == "br-int" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, gatewaySpec, tc.name, tc.opts)
			for _, c := range link.Components {
				if !c.Gateway {
					t.Errorf("component %+v not labelled as on the gateway", c)
				}
			}
			sites := tb.LocalSites()
			gw, a, b := sites[0], tb.Node(sites[0]), tb.Node(sites[1])
			routes, err := gw.Netlink().RouteGet(net.IP(b.Addr().AsSlice()))
			if err != nil || len(routes) == 0 {
				t.Fatalf("gateway a: route to node b: %v %v", routes, err)
			}
			dev, err := gw.Netlink().LinkByIndex(routes[0].LinkIndex)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.dev(dev.Attrs().Name) {
				t.Errorf("gateway a routes node b (%s) through %s", b.Addr(), dev.Attrs().Name)
			}
			before := txPackets(t, gw, dev.Attrs().Name)
			seen := sourceSeen(t, a, b)
			if seen != a.Addr() {
				t.Errorf("server in node b saw the client as %s, want node a's %s", seen, a.Addr())
			}
			if after := txPackets(t, gw, dev.Attrs().Name); after <= before {
				t.Errorf("%s on gateway a sent %d packets before the exchange, %d after", dev.Attrs().Name, before, after)
			}
			datapathtest.CarriesAll(t, tb, link)
		})
	}
}

// TestGatewayNotSupported checks that a datapath without the gateway
// capability, or with options that exclude it, fails before anything is
// built, with a clear error, both when built and when a scenario names it.
func TestGatewayNotSupported(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts map[string]any
		want string
	}{
		{"mtls-relay", nil, "topology gateway: not supported by mtls-relay"},
		{"mesh-gateway", nil, "topology gateway: not supported by mesh-gateway"},
		{"ipsec", map[string]any{"mode": "transport", "esp": "auto", "proposal": "aes128gcm16"}, "topology gateway: not supported by ipsec: ipsec transport mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, ok := plugins.Datapath(tc.name)
			if !ok {
				t.Skipf("%s not registered", tc.name)
			}
			opts := tc.opts
			if opts == nil {
				opts = datapathtest.Defaults(t, tc.name)
			}
			dp, err := info.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := datapath.CheckTopology(tc.name, dp, testbed.TopologyGateway); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("CheckTopology: %v, want %q", err, tc.want)
			}
			if err := datapath.CheckTopology(tc.name, dp, testbed.TopologyDirect); err != nil {
				t.Errorf("CheckTopology direct: %v", err)
			}
			if testing.Short() || tc.name == "ipsec" {
				return
			}
			// Build refuses before Setup: nothing is started in the sites.
			tb := datapathtest.Testbed(t, gatewaySpec)
			link, err := datapath.Build(context.Background(), tc.name, dp, tb)
			if err == nil {
				link.Close(context.Background())
				t.Fatal("Build succeeded")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Build: %v, want %q", err, tc.want)
			}
			for _, s := range tb.LocalSites() {
				links, _ := s.Netlink().LinkList()
				for _, l := range links {
					if n := l.Attrs().Name; n != "lo" && n != "eth0" && n != "node0" {
						t.Errorf("site %s has link %s after a refused Build", s.Name(), n)
					}
				}
			}
		})
	}
	src := "topology: gateway\ndatapaths:\n  - vxlan\n  - mtls-relay\nworkloads: [{type: rr}]\n"
	_, err := scenario.Parse("gw.yaml", []byte(src), plugins.Catalog{})
	if want := "gw.yaml:4: datapaths[1]: topology gateway: not supported by mtls-relay"; err == nil || err.Error() != want {
		t.Errorf("Parse: %v, want %q", err, want)
	}
}

// TestGatewayRun runs a gateway scenario through the runner, as `spanperf
// run` does, and checks every record: no error, a measurement, components
// on the gateway.
func TestGatewayRun(t *testing.T) {
	datapathtest.RequireRoot(t)
	src := `name: gw
topology: gateway
datapaths: [native, vxlan, wireguard]
workloads:
  - type: rr
repetitions: 1
duration: 1s
warmup: 200ms
`
	s, err := scenario.Parse("gw.yaml", []byte(src), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Datapaths {
		datapathtest.New(t, d.Name, d.Options) // skips where the machine cannot run one
	}
	dir, err := results.Create(filepath.Join(t.TempDir(), "run"), results.Manifest{Run: runner.NewID(), Scenario: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := runner.Run(context.Background(), runner.Options{Scenario: s, Dir: dir, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	recs, err := dir.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Datapath, r.Error)
			continue
		}
		if r.Metrics[results.TransactionsPerS] <= 0 {
			t.Errorf("%s: no transactions: %v", r.Datapath, r.Metrics)
		}
		if len(r.Components) == 0 {
			t.Errorf("%s: no components", r.Datapath)
		}
		for _, c := range r.Components {
			if !c.Gateway {
				t.Errorf("%s: component %+v not on the gateway", r.Datapath, c)
			}
		}
	}
}

// dialFrom dials to from inside site.
func dialFrom(site *netns.Site, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := site.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", to.String(), timeout)
		return err
	})
	return c, err
}

func isRefused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection refused")
}

// sourceSeen opens a listener on server's address, dials it from client
// and echoes a few bytes; it returns the client address the server saw.
func sourceSeen(t *testing.T, client, server *netns.Site) netip.Addr {
	t.Helper()
	var ln net.Listener
	if err := server.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(server.Addr(), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan netip.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- netip.Addr{}
			return
		}
		defer c.Close()
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		io.Copy(c, c)
	}()
	c, err := dialFrom(client, netip.MustParseAddrPort(ln.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("node %s → node %s: %v", client.Name(), server.Name(), err)
	}
	defer c.Close()
	msg := []byte(strings.Repeat("through the gateways ", 200))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("echo: %v", err)
	}
	return <-seen
}

// txPackets is the number of packets dev in site has sent.
func txPackets(t *testing.T, site *netns.Site, dev string) uint64 {
	t.Helper()
	l, err := site.Netlink().LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Statistics == nil {
		t.Fatalf("%s: no statistics", dev)
	}
	return l.Attrs().Statistics.TxPackets
}

func TestGatewaySpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec netns.Spec
		ok   bool
	}{
		{netns.Spec{Run: "x"}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyGateway}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyGateway, Sites: netns.MaxGatewaySites}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyGateway, Sites: netns.MaxGatewaySites + 1}, false},
		{netns.Spec{Run: "x", Topology: testbed.TopologyMesh}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyDirect}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyHub, Sites: 16}, true},
		{netns.Spec{Run: "x", Topology: testbed.TopologyChain}, true},
		{netns.Spec{Run: "x", Topology: "star"}, false},
	} {
		tc.spec.Normalize()
		if err := tc.spec.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v, want ok %v", tc.spec, err, tc.ok)
		}
	}
	if got := netns.NodePrefix(netns.MaxGatewaySites - 1); got != netip.MustParsePrefix("198.19.255.0/24") {
		t.Errorf("last node prefix %s", got)
	}
}
