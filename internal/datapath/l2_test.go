package datapath_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func TestMacvlanCarriesAll(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "macvlan", nil)
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	if got := datapathtest.AddrOf(t, link.Target(a, b, 7100)); got != netip.MustParseAddrPort("198.19.5.2:7100") {
		t.Errorf("target %s, want b's address on the segment 198.19.5.2:7100", got)
	}
	l, err := b.Netlink().LinkByName("macvlan0")
	if err != nil {
		t.Fatal(err)
	}
	if mv, ok := l.(*netlink.Macvlan); !ok || mv.Mode != netlink.MACVLAN_MODE_BRIDGE {
		t.Errorf("site b's link %T %+v, want a macvlan in bridge mode", l, l)
	}
	datapathtest.CarriesAll(t, tb, link)
}

// The segment joins every site to every other, and the traffic does not
// cross the wan router: while a stream moves gigabytes from site a to
// site c, the wan's links to the sites send less than 1% of that (a
// stray ARP or IPv6 packet may pass; the stream's packets do not).
// Through native, the control, they send at least as much as it moved.
func TestMacvlanDirect(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
	}{{"macvlan", true}, {"native", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{Sites: 3}, tc.name, nil)
			if tc.off {
				datapathtest.AllReach(t, tb, link, 9000, 3*time.Second)
			}
			before := wanSentBytes(t, tb)
			st := datapathtest.MustRun(t, tb, link, "stream", results.Params{"message_size": int64(65536), "streams": int64(1)}, time.Second, 200*time.Millisecond)
			// The window's bytes; the warm-up's crossed too.
			moved := st.Metrics[results.ThroughputBPS] / 8
			sent := float64(wanSentBytes(t, tb) - before)
			t.Logf("stream moved %.3g bytes; the wan's links sent %.3g", moved, sent)
			if moved < 1e6 {
				t.Fatalf("stream moved %.3g bytes", moved)
			}
			if tc.off && sent > 0.01*moved {
				t.Errorf("the wan's links sent %.3g bytes, want under 1%% of the %.3g the stream moved", sent, moved)
			}
			if !tc.off && sent < moved {
				t.Errorf("the wan's links sent %.3g bytes, want at least the %.3g the stream moved", sent, moved)
			}
		})
	}
}

// wanSentBytes sums the bytes sent by the wan's links to the sites.
func wanSentBytes(t *testing.T, tb *netns.Testbed) uint64 {
	t.Helper()
	var n uint64
	for _, s := range tb.LocalSites() {
		l, err := tb.WAN().Netlink().LinkByName("to-" + s.Name())
		if err != nil {
			t.Fatal(err)
		}
		n += l.Attrs().Statistics.TxBytes
	}
	return n
}

// With a site's child down nothing passes: the segment, not the
// underlay, carries the traffic.
func TestMacvlanChildDown(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "macvlan", nil)
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	target := datapathtest.AddrOf(t, link.Target(a, b, 9000))
	datapathtest.Serve(t, b, target)
	if err := datapathtest.Dial(a, target, 2*time.Second); err != nil {
		t.Fatalf("dial through the segment: %v", err)
	}
	l, err := a.Netlink().LinkByName("macvlan0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Netlink().LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	if err := datapathtest.Dial(a, target, time.Second); err == nil {
		t.Fatal("dial with a's child down succeeded: the segment is not what carries traffic")
	}
}

// In the gateway topology the node behind one site reaches the node
// behind the other through the segment.
func TestMacvlanGateway(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{Topology: testbed.TopologyGateway}, "macvlan", nil)
	datapathtest.CarriesAll(t, tb, link)
}

// After link.Close the parent and every child are gone; after tb.Close
// nothing of the run remains.
func TestMacvlanLeavesNothing(t *testing.T) {
	dp := datapathtest.New(t, "macvlan", nil)
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := datapath.Build(context.Background(), "macvlan", dp, tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.WAN().Netlink().LinkByName("lan-macvlan"); err != nil {
		t.Fatalf("parent while up: %v", err)
	}
	if err := link.Close(context.Background()); err != nil {
		t.Fatalf("link close: %v", err)
	}
	if _, err := tb.WAN().Netlink().LinkByName("lan-macvlan"); err == nil {
		t.Error("parent lan-macvlan still in the wan after link close")
	}
	for _, s := range tb.LocalSites() {
		if _, err := s.Netlink().LinkByName("macvlan0"); err == nil {
			t.Errorf("macvlan0 still in site %s after link close", s.Name())
		}
		if rs, _ := s.Netlink().RouteList(nil, netlink.FAMILY_V4); len(rs) == 0 {
			t.Errorf("site %s lost its underlay routes", s.Name())
		}
	}
	// A second setup on the same testbed works (setup-timed trials build
	// the datapath more than once).
	link, err = datapath.Build(context.Background(), "macvlan", dp, tb)
	if err != nil {
		t.Fatalf("second setup: %v", err)
	}
	if err := link.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"lan-macvlan", "macvlan0"} {
		if _, err := os.Stat("/sys/class/net/" + n); err == nil {
			t.Errorf("%s in the host namespace", n)
		}
	}
}

// A shaped testbed is refused: the segment would bypass its shaping.
func TestMacvlanRefusesRate(t *testing.T) {
	dp := datapathtest.New(t, "macvlan", nil)
	tb := datapathtest.Testbed(t, netns.Spec{RateBPS: 100e6})
	if link, err := dp.Setup(context.Background(), tb); err == nil {
		link.Close(context.Background())
		t.Fatal("setup on a shaped testbed succeeded")
	} else if !strings.Contains(err.Error(), "rate does not apply") {
		t.Errorf("setup: %v", err)
	}
}

func kernelHasIPvlan(t *testing.T) bool {
	t.Helper()
	datapathtest.RequireRoot(t)
	err := netns.Scratch(func(h *netlink.Handle) error {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "d0"}, PeerName: "d1"}); err != nil {
			return err
		}
		p, err := h.LinkByName("d0")
		if err != nil {
			return err
		}
		return h.LinkAdd(&netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "i0", ParentIndex: p.Attrs().Index}})
	})
	return err == nil
}

// On a kernel without ipvlan the preflight says so, a setup is refused
// with the same reason before anything is built, and doctor's check
// reports it; on one with it, ipvlan carries stream, rr and crr in both
// modes.
func TestIPvlan(t *testing.T) {
	info, _ := plugins.Datapath("ipvlan")
	for _, mode := range []string{"l2", "l3"} {
		t.Run(mode, func(t *testing.T) {
			dp, err := info.New(map[string]any{"mode": mode})
			if err != nil {
				t.Fatal(err)
			}
			if kernelHasIPvlan(t) {
				tb, link := datapathtest.Setup(t, netns.Spec{}, "ipvlan", map[string]any{"mode": mode})
				datapathtest.CarriesAll(t, tb, link)
				return
			}
			err = dp.(datapath.Checker).Check(context.Background())
			if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_IPVLAN") {
				t.Fatalf("Check = %v, want ErrNotSupported naming CONFIG_IPVLAN", err)
			}
			tb := datapathtest.Testbed(t, netns.Spec{})
			link, err := datapath.Build(context.Background(), "ipvlan", dp, tb)
			if err == nil {
				link.Close(context.Background())
				t.Fatal("setup on a kernel without ipvlan succeeded")
			}
			if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_IPVLAN") {
				t.Errorf("setup: %v, want the preflight's reason", err)
			}
			if _, err := tb.WAN().Netlink().LinkByName("lan-ipvlan"); err == nil {
				t.Error("a refused setup left its parent in the wan")
			}
		})
	}
}

// The links ipvlan would create (not exercised on a kernel without it):
// a veth parent in the wan, and children of that parent in the mode
// asked, created straight into each site's namespace.
func TestIPvlanLinks(t *testing.T) {
	info, _ := plugins.Datapath("ipvlan")
	for _, tc := range []struct {
		mode string
		want netlink.IPVlanMode
	}{{"l2", netlink.IPVLAN_MODE_L2}, {"l3", netlink.IPVLAN_MODE_L3}} {
		dp, err := info.New(map[string]any{"mode": tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		d := dp.(*datapath.L2Direct)
		p, ok := d.ParentLink(1500).(*netlink.Veth)
		if !ok || p.Name != "lan-ipvlan" || p.MTU != 1500 {
			t.Errorf("parent %T %+v, want veth lan-ipvlan, mtu 1500", d.ParentLink(1500), d.ParentLink(1500))
		}
		c, ok := d.ChildLink("ipvlan0", 7, 42).(*netlink.IPVlan)
		if !ok {
			t.Fatalf("child %T, want *netlink.IPVlan", d.ChildLink("ipvlan0", 7, 42))
		}
		if c.Mode != tc.want || c.ParentIndex != 7 || c.Name != "ipvlan0" || c.Namespace != netlink.NsFd(42) {
			t.Errorf("mode %s: child %+v, want mode %v, parent 7, name ipvlan0, namespace fd 42", tc.mode, c, tc.want)
		}
	}
	if _, err := info.New(map[string]any{"mode": "l3s"}); err == nil {
		t.Error("mode l3s accepted")
	}
	if got := datapath.L2Subnet("ipvlan"); got != netip.MustParsePrefix("198.19.6.0/24") {
		t.Errorf("ipvlan subnet %s", got)
	}
	src := "datapaths:\n  - name: ipvlan\n    mode: l4\nworkloads: [{type: rr}]\n"
	if _, err := scenario.Parse("ipv.yaml", []byte(src), plugins.Catalog{}); err == nil || !strings.Contains(err.Error(), "ipv.yaml:3") {
		t.Errorf("Parse with mode l4: %v, want an error at ipv.yaml:3", err)
	}
}
