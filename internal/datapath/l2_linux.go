package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// L2 kinds: the child links of one parent that put the sites on one L2
// segment.
const (
	L2Macvlan = "macvlan"
	L2IPvlan  = "ipvlan"
)

// IPvlan modes (the ipvlan datapath's mode option).
const (
	IPvlanL2 = "l2"
	IPvlanL3 = "l3"
)

// L2Direct puts the sites on one L2 segment with no router in between:
// a parent link "lan-<kind>" (a veth) in the wan namespace, and in each site
// a child of it ("macvlan0" in bridge mode, or "ipvlan0" in mode l2 or
// l3) with an address in Subnet (site i at .i+1). Children of one parent
// reach each other inside the kernel, through neither the wan router nor
// the testbed's shaped veth links; clients dial the server's address on
// the segment. In the gateway topology each site also routes the subnets
// behind every peer via that peer's address on the segment.
type L2Direct struct {
	// Kind is L2Macvlan or L2IPvlan.
	Kind string
	// Mode is the ipvlan mode, IPvlanL2 or IPvlanL3; "" means l2. Macvlan
	// is always in bridge mode.
	Mode string
	// Subnet is the segment's /24; the zero value means L2Subnet(Kind).
	Subnet netip.Prefix
}

var (
	_ Datapath       = (*L2Direct)(nil)
	_ Checker        = (*L2Direct)(nil)
	_ GatewayChecker = (*L2Direct)(nil)
)

// L2Subnet is the segment of kind: 198.19.5.0/24 for macvlan,
// 198.19.6.0/24 for ipvlan.
func L2Subnet(kind string) netip.Prefix {
	if kind == L2IPvlan {
		return netip.MustParsePrefix("198.19.6.0/24")
	}
	return netip.MustParsePrefix("198.19.5.0/24")
}

// MacvlanInfo registers the macvlan datapath.
func MacvlanInfo() Info {
	return Info{
		Name:    L2Macvlan,
		Summary: "sites as macvlan children (bridge mode) of one parent link in the wan namespace: one L2 segment, no router (the L2-direct shape)",
		New: func(map[string]any) (Datapath, error) {
			return &L2Direct{Kind: L2Macvlan}, nil
		},
	}
}

// IPvlanInfo registers the ipvlan datapath.
func IPvlanInfo() Info {
	return Info{
		Name:    L2IPvlan,
		Summary: "sites as ipvlan children (mode l2 or l3) of one parent link in the wan namespace: no bridge, no router (needs CONFIG_IPVLAN)",
		Options: []scenario.Field{
			{Name: "mode", Kind: scenario.KindString, Enum: []string{IPvlanL2, IPvlanL3}, Default: IPvlanL2, Doc: "ipvlan mode: l2 (children answer ARP) or l3 (the parent routes between children, no ARP)"},
		},
		New: func(o map[string]any) (Datapath, error) {
			mode, _ := o["mode"].(string)
			if mode == "" {
				mode = IPvlanL2
			}
			if mode != IPvlanL2 && mode != IPvlanL3 {
				return nil, fmt.Errorf("ipvlan: mode %q (want l2 or l3)", mode)
			}
			return &L2Direct{Kind: L2IPvlan, Mode: mode}, nil
		},
	}
}

func (d *L2Direct) subnet() netip.Prefix {
	if d.Subnet.IsValid() {
		return d.Subnet
	}
	return L2Subnet(d.Kind)
}

// l2Addr is site i's address on the segment subnet, with its length.
func l2Addr(subnet netip.Prefix, i int) netip.Prefix {
	b := subnet.Masked().Addr().As4()
	b[3] = byte(i + 1)
	return netip.PrefixFrom(netip.AddrFrom4(b), subnet.Bits())
}

// ParentName is the parent link's name in the wan namespace.
func (d *L2Direct) ParentName() string { return "lan-" + d.Kind }

// ChildName is the child link's name in each site.
func (d *L2Direct) ChildName() string { return d.Kind + "0" }

// ParentLink is the netlink description of the parent: one end of a veth
// pair whose other end, "lanpeer-<kind>", stays unused (this kernel has no
// dummy links; children of one parent reach each other without it).
func (d *L2Direct) ParentLink(mtu int) netlink.Link {
	return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: d.ParentName(), MTU: mtu}, PeerName: "lanpeer-" + d.Kind}
}

// ChildLink is the netlink description of a child named name of the
// parent with index parent, created straight into the namespace ns (a
// file descriptor; < 0: the caller's).
func (d *L2Direct) ChildLink(name string, parent, ns int) netlink.Link {
	la := netlink.LinkAttrs{Name: name, ParentIndex: parent}
	if ns >= 0 {
		la.Namespace = netlink.NsFd(ns)
	}
	if d.Kind == L2IPvlan {
		mode := netlink.IPVLAN_MODE_L2
		if d.Mode == IPvlanL3 {
			mode = netlink.IPVLAN_MODE_L3
		}
		return &netlink.IPVlan{LinkAttrs: la, Mode: mode, Flag: netlink.IPVLAN_FLAG_BRIDGE}
	}
	return &netlink.Macvlan{LinkAttrs: la, Mode: netlink.MACVLAN_MODE_BRIDGE}
}

var l2Config = map[string]string{L2Macvlan: "MACVLAN", L2IPvlan: "IPVLAN"}

// Check creates a parent and one child in a scratch namespace: the kernel
// has the child kind, or the error says which kernel option is missing.
func (d *L2Direct) Check(context.Context) error {
	return kernelPreflight(d.Kind, l2Config[d.Kind], "an "+d.Kind+" child", "", func(h *netlink.Handle) error {
		if err := h.LinkAdd(d.ParentLink(1500)); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
		p, err := h.LinkByName(d.ParentName())
		if err != nil {
			return err
		}
		return h.LinkAdd(d.ChildLink("probe0", p.Attrs().Index, -1))
	})
}

// CheckGateway accepts the gateway topology: each site routes the subnets
// behind its peers via their addresses on the segment.
func (d *L2Direct) CheckGateway() error { return nil }

// MaxSites is the segment's size: site i is at .i+1 of a /24.
func (d *L2Direct) MaxSites() int { return 253 }

// Setup builds the parent in the wan namespace and a child in every site.
func (d *L2Direct) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("%s: needs the local network-namespace testbed", d.Kind)
	}
	if err := d.Check(ctx); err != nil {
		return nil, err
	}
	if ltb.Spec().RateBPS > 0 {
		return nil, fmt.Errorf("%s: the sites meet on one L2 segment, past the shaped links: a testbed rate does not apply", d.Kind)
	}
	seg, err := newSegment(ltb, d, d.subnet())
	if err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
	}
	for i, s := range sites {
		for j, peer := range sites {
			if j == i {
				continue
			}
			if err := routeBehind(s.Netlink(), seg.child(i), peer, seg.addr(j)); err != nil {
				return nil, errors.Join(fmt.Errorf("%s on %s: %w", d.Kind, s.Name(), err), seg.close())
			}
		}
	}
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(seg.addr(index[to.Name()]), uint16(port))
		}),
		Components: []results.Component{KernelComponent()},
		Close:      func(context.Context) error { return seg.close() },
	}, nil
}

// segment is an L2 segment in place: the parent in the wan namespace and a
// child in every site.
type segment struct {
	tb       *netns.Testbed
	d        *L2Direct
	subnet   netip.Prefix
	children []netlink.Link
}

// newSegment creates the parent of d in tb's wan namespace and a child of
// it in every site, addressed in subnet and up. On error it removes what
// it made.
func newSegment(tb *netns.Testbed, d *L2Direct, subnet netip.Prefix) (_ *segment, err error) {
	seg := &segment{tb: tb, d: d, subnet: subnet}
	wan := tb.WAN().Netlink()
	if err := wan.LinkAdd(d.ParentLink(tb.Spec().MTU)); err != nil {
		return nil, fmt.Errorf("%s: parent %s in the wan: %w", d.Kind, d.ParentName(), err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, seg.close())
		}
	}()
	parent, err := wan.LinkByName(d.ParentName())
	if err != nil {
		return nil, fmt.Errorf("%s: parent: %w", d.Kind, err)
	}
	// The children follow the parent's carrier, which a veth has only
	// with both ends up.
	for _, n := range []string{d.ParentName(), "lanpeer-" + d.Kind} {
		l, err := wan.LinkByName(n)
		if err == nil {
			err = wan.LinkSetUp(l)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s up: %w", d.Kind, n, err)
		}
	}
	for i, s := range tb.LocalSites() {
		if err := wan.LinkAdd(d.ChildLink(d.ChildName(), parent.Attrs().Index, int(s.Handle()))); err != nil {
			return nil, fmt.Errorf("%s on %s: add %s: %w", d.Kind, s.Name(), d.ChildName(), err)
		}
		h := s.Netlink()
		c, err := h.LinkByName(d.ChildName())
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", d.Kind, s.Name(), err)
		}
		seg.children = append(seg.children, c)
		p := l2Addr(subnet, i)
		ipn := &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
		if err := h.AddrAdd(c, &netlink.Addr{IPNet: ipn}); err != nil {
			return nil, fmt.Errorf("%s on %s: address %s: %w", d.Kind, s.Name(), p, err)
		}
		if err := h.LinkSetUp(c); err != nil {
			return nil, fmt.Errorf("%s on %s: up: %w", d.Kind, s.Name(), err)
		}
	}
	return seg, nil
}

// child is site i's child link.
func (seg *segment) child(i int) netlink.Link { return seg.children[i] }

// addr is site i's address on the segment.
func (seg *segment) addr(i int) netip.Addr { return l2Addr(seg.subnet, i).Addr() }

// close deletes the children, then the parent; routes through them go
// with them. It is safe to call twice.
func (seg *segment) close() error {
	var errs []error
	for i, s := range seg.tb.LocalSites() {
		if i >= len(seg.children) {
			break
		}
		if l, err := s.Netlink().LinkByName(seg.d.ChildName()); err == nil {
			if err := s.Netlink().LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("%s on %s: delete %s: %w", seg.d.Kind, s.Name(), seg.d.ChildName(), err))
			}
		}
	}
	seg.children = nil
	wan := seg.tb.WAN().Netlink()
	if l, err := wan.LinkByName(seg.d.ParentName()); err == nil {
		if err := wan.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("%s: delete parent %s: %w", seg.d.Kind, seg.d.ParentName(), err))
		}
	}
	return errors.Join(errs...)
}

var _ WANBypasser = (*L2Direct)(nil)

// BypassesWAN: the sites meet on one L2 segment of their own.
func (d *L2Direct) BypassesWAN() string {
	return fmt.Sprintf("%s: the sites meet on one L2 segment, past the wan router: its rate, delay, jitter and loss would not apply", d.Kind)
}
