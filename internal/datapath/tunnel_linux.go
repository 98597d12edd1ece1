package datapath

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// Tunnel is a kernel overlay between sites: vxlan, geneve, gre or ipip. Each
// site gets a tunnel device "tun-<kind>" with an address in 198.19.0.0/24
// (site i at .i+1), and clients dial the server's overlay address. In the
// gateway topology each site also routes the subnets behind every peer via
// that peer's overlay address.
type Tunnel struct {
	// Kind is "vxlan", "geneve", "gre" or "ipip".
	Kind string
	// MTU of the tunnel device; 0 means the underlay MTU less the
	// encapsulation overhead.
	MTU int
	// VNI is the virtual network identifier (vxlan, geneve).
	VNI int
	// Port is the UDP destination port (vxlan, geneve); 0 means the IANA port.
	Port int
}

var (
	_ Datapath       = (*Tunnel)(nil)
	_ Checker        = (*Tunnel)(nil)
	_ GatewayChecker = (*Tunnel)(nil)
)

// overhead is each kind's encapsulation overhead on an IPv4 underlay.
var overhead = map[string]int{"vxlan": 50, "geneve": 50, "gre": 24, "ipip": 20}

// TunnelInfo registers the kernel tunnel of kind.
func TunnelInfo(kind, summary string) Info {
	opts := []scenario.Field{
		{Name: "mtu", Kind: scenario.KindInt, Doc: "tunnel device MTU (0: underlay MTU less encapsulation)", Default: int64(0), HasMin: true, Min: 0},
	}
	if kind == "vxlan" || kind == "geneve" {
		opts = append(opts,
			scenario.Field{Name: "vni", Kind: scenario.KindInt, Doc: "virtual network identifier", Default: int64(42), HasMin: true, Min: 1},
			scenario.Field{Name: "port", Kind: scenario.KindInt, Doc: "UDP port (0: IANA default)", Default: int64(0), HasMin: true, Min: 0},
		)
	}
	return Info{
		Name:    kind,
		Summary: summary,
		Options: opts,
		New: func(o map[string]any) (Datapath, error) {
			t := &Tunnel{Kind: kind, MTU: intOpt(o, "mtu"), VNI: intOpt(o, "vni"), Port: intOpt(o, "port")}
			if t.VNI == 0 {
				t.VNI = 42
			}
			return t, nil
		},
	}
}

// overlayAddr is site i's address on the overlay.
func overlayAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 0, byte(i + 1)}) }

func (t *Tunnel) device() string { return "tun-" + t.Kind }

// link returns the netlink description of the tunnel device in site local,
// towards remote (the only peer for point-to-point kinds).
func (t *Tunnel) link(mtu int, local, remote netip.Addr, vtep int) netlink.Link {
	la := netlink.LinkAttrs{Name: t.device(), MTU: mtu}
	ip := func(a netip.Addr) net.IP {
		if !a.IsValid() {
			return nil
		}
		return net.IP(a.AsSlice())
	}
	switch t.Kind {
	case "vxlan":
		port := t.Port
		if port == 0 {
			port = 4789
		}
		return &netlink.Vxlan{LinkAttrs: la, VxlanId: t.VNI, SrcAddr: ip(local), Port: port, VtepDevIndex: vtep}
	case "geneve":
		port := t.Port
		if port == 0 {
			port = 6081
		}
		return &netlink.Geneve{LinkAttrs: la, ID: uint32(t.VNI), Remote: ip(remote), Dport: uint16(port)}
	case "gre":
		return &netlink.Gretun{LinkAttrs: la, Local: ip(local), Remote: ip(remote)}
	default:
		return &netlink.Iptun{LinkAttrs: la, Local: ip(local), Remote: ip(remote)}
	}
}

// Check tries to create the tunnel device in a scratch namespace.
func (t *Tunnel) Check(context.Context) error {
	lo := netip.MustParseAddr("198.18.255.1")
	re := netip.MustParseAddr("198.18.255.2")
	return kernelPreflight(t.Kind, kconfig[t.Kind], "a "+t.Kind+" link", "", func(h *netlink.Handle) error {
		l := t.link(1400, lo, re, 0)
		if t.Kind == "vxlan" {
			l.(*netlink.Vxlan).SrcAddr = nil
		}
		return h.LinkAdd(l)
	})
}

// kernelPreflight runs add in a scratch namespace. An error the kernel
// gives for a link kind it was built without (EOPNOTSUPP, ENOENT, EINVAL)
// is ErrNotSupported naming CONFIG_config: "NAME: kernel lacks
// CONFIG_X (creating WHAT: ERR; HINT)"; any other is a failed preflight.
func kernelPreflight(name, config, what, hint string, add func(h *netlink.Handle) error) error {
	err := netns.Scratch(add)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL):
		if hint != "" {
			hint = "; " + hint
		}
		return notSupported("%s: kernel lacks CONFIG_%s (creating %s: %v%s)", name, config, what, err, hint)
	}
	return fmt.Errorf("%s: preflight: %w", name, err)
}

// CheckGateway accepts the gateway topology: every kind routes.
func (t *Tunnel) CheckGateway() error { return nil }

// MaxSites is 2 for the point-to-point kinds; vxlan joins any number (a
// forwarding entry per peer).
func (t *Tunnel) MaxSites() int {
	if t.Kind == "vxlan" {
		return math.MaxInt
	}
	return 2
}

var kconfig = map[string]string{"vxlan": "VXLAN", "geneve": "GENEVE", "gre": "NET_IPGRE", "ipip": "NET_IPIP"}

// Setup creates one tunnel device per site and, for vxlan, forwarding
// entries towards every other site.
func (t *Tunnel) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("%s: needs the local network-namespace testbed", t.Kind)
	}
	if err := t.Check(ctx); err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	if t.Kind != "vxlan" && len(sites) != 2 {
		return nil, fmt.Errorf("%s: joins exactly 2 sites, the testbed has %d", t.Kind, len(sites))
	}
	mtu := t.MTU
	if mtu == 0 {
		mtu = ltb.Spec().MTU - overhead[t.Kind]
	}
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
	}
	for i, s := range sites {
		h := s.Netlink()
		eth, err := h.LinkByName("eth0")
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", t.Kind, s.Name(), err)
		}
		remote := netip.Addr{}
		if len(sites) == 2 {
			remote = sites[1-i].Addr()
		}
		if err := h.LinkAdd(t.link(mtu, s.Addr(), remote, eth.Attrs().Index)); err != nil {
			return nil, fmt.Errorf("%s on %s: add %s: %w", t.Kind, s.Name(), t.device(), err)
		}
		dev, err := h.LinkByName(t.device())
		if err != nil {
			return nil, err
		}
		if t.Kind == "vxlan" {
			for j, peer := range sites {
				if j == i {
					continue
				}
				err := h.NeighAppend(&netlink.Neigh{
					LinkIndex:    dev.Attrs().Index,
					Family:       unix.AF_BRIDGE,
					Flags:        netlink.NTF_SELF,
					State:        netlink.NUD_PERMANENT | netlink.NUD_NOARP,
					IP:           net.IP(peer.Addr().AsSlice()),
					HardwareAddr: net.HardwareAddr{0, 0, 0, 0, 0, 0},
				})
				if err != nil {
					return nil, fmt.Errorf("vxlan on %s: fdb to %s: %w", s.Name(), peer.Name(), err)
				}
			}
		}
		a := overlayAddr(i)
		ipn := &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(24, 32)}
		if err := h.AddrAdd(dev, &netlink.Addr{IPNet: ipn}); err != nil {
			return nil, fmt.Errorf("%s on %s: address: %w", t.Kind, s.Name(), err)
		}
		if err := h.LinkSetUp(dev); err != nil {
			return nil, fmt.Errorf("%s on %s: up: %w", t.Kind, s.Name(), err)
		}
		for j, peer := range sites {
			if j == i {
				continue
			}
			if err := routeBehind(h, dev, peer, overlayAddr(j)); err != nil {
				return nil, fmt.Errorf("%s on %s: %w", t.Kind, s.Name(), err)
			}
		}
	}
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(overlayAddr(index[to.Name()]), uint16(port))
		}),
		Expose:     t.exposeFunc(sites),
		Components: []results.Component{KernelComponent()},
		Close: func(context.Context) error {
			var errs []error
			for _, s := range sites {
				if l, err := s.Netlink().LinkByName(t.device()); err == nil {
					errs = append(errs, s.Netlink().LinkDel(l))
				}
			}
			return errors.Join(errs...)
		},
	}, nil
}

// routeBehind routes the subnets behind peer (gateway topology; none in the
// direct topology) through dev: via the peer's overlay address when via is
// valid, else straight into dev (point-to-point devices). The routes go
// when dev is deleted.
func routeBehind(h *netlink.Handle, dev netlink.Link, peer *netns.Site, via netip.Addr) error {
	for _, p := range peer.Behind() {
		r := &netlink.Route{
			LinkIndex: dev.Attrs().Index,
			Dst:       &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		}
		if via.IsValid() {
			r.Gw = net.IP(via.AsSlice())
		}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("route %s behind %s: %w", p, peer.Name(), err)
		}
	}
	return nil
}
