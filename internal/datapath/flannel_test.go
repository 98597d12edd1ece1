package datapath_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var flannels = []string{"flannel-host-gw", "flannel-vxlan"}

// Both backends carry stream, rr and crr from pod to pod, and the
// workloads run in the pods, not in the sites.
func TestFlannelCarriesAll(t *testing.T) {
	for _, name := range flannels {
		t.Run(name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, name, nil)
			a, b := tb.LocalSites()[0], tb.LocalSites()[1]
			if got := datapathtest.AddrOf(t, link.Target(a, b, 7100)); got != netip.MustParseAddrPort("198.19.11.2:7100") {
				t.Errorf("target %s, want b's pod 198.19.11.2:7100", got)
			}
			if w := link.Workloads(b); w.Name() != "b-pod" {
				t.Errorf("workloads of b run in %s, want b-pod", w.Name())
			}
			if l, err := b.Netlink().LinkByName("veth-pod"); err != nil || l.Attrs().MasterIndex == 0 {
				t.Errorf("b's pod veth %v (%v), want it in cni0", l, err)
			}
			if name == "flannel-vxlan" {
				l, err := b.Netlink().LinkByName("flannel.1")
				if err != nil {
					t.Fatal(err)
				}
				v, ok := l.(*netlink.Vxlan)
				if !ok || v.VxlanId != 1 || v.Port != 8472 || v.Learning || v.MTU != 1450 {
					t.Errorf("flannel.1 %+v, want vxlan VNI 1, port 8472, no learning, mtu 1450", l)
				}
			}
			datapathtest.CarriesAll(t, tb, link)
		})
	}
}

// Three sites: every pod reaches every other.
func TestFlannelMesh(t *testing.T) {
	for _, name := range flannels {
		t.Run(name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{Sites: 3}, name, nil)
			for _, to := range tb.LocalSites() {
				pod := link.Workloads(to).(*netns.Site)
				datapathtest.Serve(t, pod, datapathtest.AddrOf(t, link.Target(to, to, 9000)))
			}
			for _, from := range tb.LocalSites() {
				for _, to := range tb.LocalSites() {
					if from == to {
						continue
					}
					pod := link.Workloads(from).(*netns.Site)
					if err := datapathtest.Dial(pod, datapathtest.AddrOf(t, link.Target(from, to, 9000)), 3*time.Second); err != nil {
						t.Errorf("pod %s → pod %s: %v", from.Name(), to.Name(), err)
					}
				}
			}
		})
	}
}

// Without its route to the peer's pod subnet a site passes no traffic to
// it (host-gw: the route via the peer; vxlan: the route onlink through
// flannel.1); with the route back it does. For vxlan, a forwarding entry
// pointing at the wrong VTEP passes nothing either.
func TestFlannelWrongRoute(t *testing.T) {
	for _, name := range flannels {
		t.Run(name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, name, nil)
			a, b := tb.LocalSites()[0], tb.LocalSites()[1]
			podA, podB := link.Workloads(a).(*netns.Site), link.Workloads(b).(*netns.Site)
			target := datapathtest.AddrOf(t, link.Target(a, b, 9000))
			datapathtest.Serve(t, podB, target)
			if err := datapathtest.Dial(podA, target, 2*time.Second); err != nil {
				t.Fatalf("dial pod to pod: %v", err)
			}
			dst := &net.IPNet{IP: net.IPv4(198, 19, 11, 0).To4(), Mask: net.CIDRMask(24, 32)}
			rs, err := a.Netlink().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst}, netlink.RT_FILTER_DST)
			if err != nil || len(rs) != 1 {
				t.Fatalf("a's routes to b's pod subnet: %v (%v), want one", rs, err)
			}
			if err := a.Netlink().RouteDel(&rs[0]); err != nil {
				t.Fatal(err)
			}
			if err := datapathtest.Dial(podA, target, time.Second); err == nil {
				t.Fatal("dial without the route to b's pod subnet succeeded")
			}
			if err := a.Netlink().RouteAdd(&rs[0]); err != nil {
				t.Fatal(err)
			}
			if err := datapathtest.Dial(podA, target, 3*time.Second); err != nil {
				t.Fatalf("dial with the route back: %v", err)
			}
			if name != "flannel-vxlan" {
				return
			}
			dev, err := a.Netlink().LinkByName("flannel.1")
			if err != nil {
				t.Fatal(err)
			}
			fdb, err := a.Netlink().NeighList(dev.Attrs().Index, unix.AF_BRIDGE)
			if err != nil {
				t.Fatal(err)
			}
			var entry *netlink.Neigh
			for i, n := range fdb {
				if n.IP != nil && n.IP.Equal(net.IPv4(198, 19, 7, 2)) {
					entry = &fdb[i]
				}
			}
			if entry == nil {
				t.Fatalf("no forwarding entry to b's VTEP in %+v", fdb)
			}
			wrong := *entry
			wrong.IP = net.IPv4(198, 19, 7, 99).To4()
			if err := a.Netlink().NeighSet(&wrong); err != nil {
				t.Fatal(err)
			}
			if err := a.Netlink().NeighDel(entry); err != nil {
				t.Fatal(err)
			}
			if err := datapathtest.Dial(podA, target, time.Second); err == nil {
				t.Fatal("dial with the forwarding entry at the wrong VTEP succeeded")
			}
		})
	}
}

// After link.Close no pod, bridge, tunnel or node network remains (a
// second setup on the same testbed works, as setup-timed trials need);
// after tb.Close nothing of the run remains.
func TestFlannelLeavesNothing(t *testing.T) {
	for _, name := range flannels {
		t.Run(name, func(t *testing.T) {
			dp := datapathtest.New(t, name, nil)
			tb := datapathtest.Testbed(t, netns.Spec{})
			for round := range 2 {
				link, err := datapath.Build(context.Background(), name, dp, tb)
				if err != nil {
					t.Fatalf("setup %d: %v", round, err)
				}
				if err := link.Close(context.Background()); err != nil {
					t.Fatalf("link close: %v", err)
				}
				for _, ns := range netns.ListNamed() {
					if strings.Contains(ns, tb.Spec().Run) && strings.HasSuffix(ns, "-pod") {
						t.Errorf("pod namespace %s after link close", ns)
					}
				}
				for _, s := range tb.LocalSites() {
					links, _ := s.Netlink().LinkList()
					for _, l := range links {
						if n := l.Attrs().Name; n != "lo" && n != "eth0" {
							t.Errorf("site %s has link %s after link close", s.Name(), n)
						}
					}
				}
				if _, err := tb.WAN().Netlink().LinkByName("lan-macvlan"); err == nil {
					t.Error("node network parent left in the wan")
				}
			}
		})
	}
}

// The gateway topology is refused at parse time: the pods already sit
// behind the sites.
func TestFlannelNoGateway(t *testing.T) {
	for _, name := range flannels {
		info, _ := plugins.Datapath(name)
		dp, err := info.New(map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		if err := datapath.CheckTopology(name, dp, testbed.TopologyGateway); err == nil {
			t.Errorf("%s accepts the gateway topology", name)
		}
	}
	src := "topology: gateway\ndatapaths:\n  - native\n  - flannel-vxlan\nworkloads: [{type: rr}]\n"
	_, err := scenario.Parse("gw.yaml", []byte(src), plugins.Catalog{})
	if want := "gw.yaml:4: datapaths[1]: topology gateway: not supported by flannel-vxlan"; err == nil || err.Error() != want {
		t.Errorf("Parse: %v, want %q", err, want)
	}
}
