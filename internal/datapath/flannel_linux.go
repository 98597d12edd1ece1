package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// Flannel backends.
const (
	FlannelHostGW = "host-gw"
	FlannelVXLAN  = "vxlan"
)

// Flannel builds the shapes of flannel's host-gw and VXLAN backends from
// the kernel's parts, as flannel and its CNI bridge plugin set them up on
// a node. The sites are the nodes: they meet on one L2 segment (the
// node network, a macvlan child "macvlan0" of a parent in the wan
// namespace, on FlannelNodeSubnet), because host-gw needs its peers on
// the link. Each site i holds a pod namespace "<site>-pod" whose eth0
// (pod subnet FlannelPodSubnet(i), the pod at .2) is a veth into the
// bridge "cni0" (at .1), and forwards. With host-gw each site routes every
// peer's pod subnet via the peer's node address; with vxlan each site has
// "flannel.1" (VNI 1, UDP 8472, no learning, address .0/32 of its pod
// subnet) and routes every peer's pod subnet via the peer's .0 onlink on
// flannel.1, with a permanent ARP entry and forwarding entry per peer, as
// flanneld writes them. Workloads run in the pods; clients dial the
// server pod's address.
type Flannel struct {
	// Backend is FlannelHostGW or FlannelVXLAN.
	Backend string
	// MTU of cni0, the pods' links and flannel.1; 0 means the underlay
	// MTU (host-gw) or the underlay MTU less 50 (vxlan), as flannel picks.
	MTU int
}

var (
	_ Datapath    = (*Flannel)(nil)
	_ Checker     = (*Flannel)(nil)
	_ SiteLimiter = (*Flannel)(nil)
)

// FlannelNodeSubnet is the node network the sites meet on.
var FlannelNodeSubnet = netip.MustParsePrefix("198.19.7.0/24")

// flannelMaxSites is how many pod subnets fit between 198.19.10.0/24
// and the service prefix 198.19.50.0/24.
const flannelMaxSites = 40

// FlannelPodSubnet is site i's pod subnet, 198.19.(10+i).0/24.
func FlannelPodSubnet(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(10 + i), 0}), 24)
}

func podHost(i int, host byte) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 19, byte(10 + i), host})
}

// flannelMAC is site i's flannel.1 address: fixed, so each site's ARP and
// forwarding entries can name its peers' before they exist.
func flannelMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x53, 0x46, 0x4c, byte(i >> 8), byte(i + 1)}
}

// FlannelInfo registers the flannel datapath of backend.
func FlannelInfo(backend string) Info {
	summary := "flannel's host-gw shape: pods behind a cni0 bridge per site, pod subnets routed via the peer site's address on one L2 node network"
	if backend == FlannelVXLAN {
		summary = "flannel's VXLAN shape: pods behind a cni0 bridge per site, pod subnets over flannel.1 (VNI 1, UDP 8472) between sites on one L2 node network"
	}
	return Info{
		Name:    "flannel-" + backend,
		Summary: summary,
		Options: []scenario.Field{
			{Name: "mtu", Kind: scenario.KindInt, Doc: "MTU of cni0, the pods' links and flannel.1 (0: as flannel picks, the underlay's, less 50 for vxlan)", Default: int64(0), HasMin: true, Min: 0},
		},
		New: func(o map[string]any) (Datapath, error) {
			return &Flannel{Backend: backend, MTU: intOpt(o, "mtu")}, nil
		},
	}
}

func (f *Flannel) name() string { return "flannel-" + f.Backend }

// Check makes sure the kernel has the parts: the node network's macvlan,
// a bridge and, for vxlan, a VXLAN device.
func (f *Flannel) Check(ctx context.Context) error {
	if err := (&L2Direct{Kind: L2Macvlan}).Check(ctx); err != nil {
		return fmt.Errorf("%s: node network: %w", f.name(), err)
	}
	err := netns.Scratch(func(h *netlink.Handle) error {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cni0"}}); err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		if f.Backend == FlannelVXLAN {
			if err := h.LinkAdd(&netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "flannel.1"}, VxlanId: 1, Port: 8472}); err != nil {
				return fmt.Errorf("vxlan: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return notSupported("%s: kernel lacks CONFIG_BRIDGE or CONFIG_VXLAN (%v)", f.name(), err)
		}
		return fmt.Errorf("%s: preflight: %w", f.name(), err)
	}
	return nil
}

// MaxSites is the number of pod subnets in the address plan.
func (f *Flannel) MaxSites() int { return flannelMaxSites }

// Setup builds the node network, then each site's bridge and pod, then
// the routes (and for vxlan the tunnel) between the pod subnets.
func (f *Flannel) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("%s: needs the local network-namespace testbed", f.name())
	}
	if err := f.Check(ctx); err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	if len(sites) > flannelMaxSites {
		return nil, fmt.Errorf("%s: joins at most %d sites; the testbed has %d", f.name(), flannelMaxSites, len(sites))
	}
	if ltb.Spec().RateBPS > 0 {
		return nil, fmt.Errorf("%s: the sites meet on one L2 node network, past the shaped links: a testbed rate does not apply", f.name())
	}
	mtu := f.MTU
	if mtu == 0 {
		mtu = ltb.Spec().MTU
		if f.Backend == FlannelVXLAN {
			mtu -= overhead["vxlan"]
		}
	}
	seg, err := newSegment(ltb, &L2Direct{Kind: L2Macvlan}, FlannelNodeSubnet)
	if err != nil {
		return nil, fmt.Errorf("%s: node network: %w", f.name(), err)
	}
	fl := &flannelLink{f: f, tb: ltb, seg: seg, pods: map[string]*netns.Site{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, fl.close())
		}
	}()
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
		if err := fl.addPod(i, s, mtu); err != nil {
			return nil, fmt.Errorf("%s on %s: %w", f.name(), s.Name(), err)
		}
		if f.Backend == FlannelVXLAN {
			if err := fl.addVTEP(i, s, mtu); err != nil {
				return nil, fmt.Errorf("%s on %s: %w", f.name(), s.Name(), err)
			}
		}
	}
	for i, s := range sites {
		for j, peer := range sites {
			if j == i {
				continue
			}
			if err := fl.routePeer(i, s, j); err != nil {
				return nil, fmt.Errorf("%s on %s: pod subnet of %s: %w", f.name(), s.Name(), peer.Name(), err)
			}
		}
	}
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(podHost(index[to.Name()], 2), uint16(port))
		}),
		Workloads: func(s testbed.Site) testbed.Site {
			if p, ok := fl.pods[s.Name()]; ok {
				return p
			}
			return s
		},
		Components: []results.Component{KernelComponent()},
		Close:      func(context.Context) error { return fl.close() },
	}, nil
}

// flannelLink is a Flannel in place.
type flannelLink struct {
	f    *Flannel
	tb   *netns.Testbed
	seg  *segment
	pods map[string]*netns.Site
}

// addPod makes site i's bridge cni0 and its pod behind it, and lets the
// site forward.
func (fl *flannelLink) addPod(i int, s *netns.Site, mtu int) error {
	h := s.Netlink()
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cni0", MTU: mtu}}); err != nil {
		return fmt.Errorf("bridge cni0: %w", err)
	}
	br, err := h.LinkByName("cni0")
	if err != nil {
		return err
	}
	if err := addrOn(h, br, netip.PrefixFrom(podHost(i, 1), 24)); err != nil {
		return err
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("cni0 up: %w", err)
	}
	if err := s.SetSysctl("net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	pod, err := fl.tb.AddNamespace(s.Name() + "-pod")
	if pod != nil {
		fl.pods[s.Name()] = pod
	}
	if err != nil {
		return fmt.Errorf("pod: %w", err)
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "veth-pod", MTU: mtu, MasterIndex: br.Attrs().Index},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(pod.Handle())),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("pod veth: %w", err)
	}
	hv, err := h.LinkByName("veth-pod")
	if err != nil {
		return err
	}
	pv, err := pod.Netlink().LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := pod.Netlink().LinkSetMTU(pv, mtu); err != nil {
		return fmt.Errorf("pod mtu: %w", err)
	}
	if err := addrOn(pod.Netlink(), pv, netip.PrefixFrom(podHost(i, 2), 24)); err != nil {
		return err
	}
	if err := h.LinkSetUp(hv); err != nil {
		return fmt.Errorf("veth-pod up: %w", err)
	}
	if err := pod.Netlink().LinkSetUp(pv); err != nil {
		return fmt.Errorf("pod eth0 up: %w", err)
	}
	gw := podHost(i, 1)
	if err := pod.Netlink().RouteAdd(&netlink.Route{LinkIndex: pv.Attrs().Index, Gw: net.IP(gw.AsSlice())}); err != nil {
		return fmt.Errorf("pod default route: %w", err)
	}
	return nil
}

// addVTEP makes site i's flannel.1 on the node network.
func (fl *flannelLink) addVTEP(i int, s *netns.Site, mtu int) error {
	h := s.Netlink()
	v := &netlink.Vxlan{
		LinkAttrs:    netlink.LinkAttrs{Name: "flannel.1", MTU: mtu, HardwareAddr: flannelMAC(i)},
		VxlanId:      1,
		SrcAddr:      net.IP(fl.seg.addr(i).AsSlice()),
		VtepDevIndex: fl.seg.child(i).Attrs().Index,
		Port:         8472,
		Learning:     false,
	}
	if err := h.LinkAdd(v); err != nil {
		return fmt.Errorf("flannel.1: %w", err)
	}
	dev, err := h.LinkByName("flannel.1")
	if err != nil {
		return err
	}
	if err := addrOn(h, dev, netip.PrefixFrom(podHost(i, 0), 32)); err != nil {
		return err
	}
	if err := h.LinkSetUp(dev); err != nil {
		return fmt.Errorf("flannel.1 up: %w", err)
	}
	return nil
}

// routePeer routes, in site i, site j's pod subnet: via j's node address
// (host-gw), or through flannel.1 to j's VTEP (vxlan).
func (fl *flannelLink) routePeer(i int, s *netns.Site, j int) error {
	h := s.Netlink()
	dst := FlannelPodSubnet(j)
	ipn := &net.IPNet{IP: net.IP(dst.Addr().AsSlice()), Mask: net.CIDRMask(24, 32)}
	if fl.f.Backend == FlannelHostGW {
		return h.RouteAdd(&netlink.Route{
			LinkIndex: fl.seg.child(i).Attrs().Index, Dst: ipn, Gw: net.IP(fl.seg.addr(j).AsSlice()),
		})
	}
	dev, err := h.LinkByName("flannel.1")
	if err != nil {
		return err
	}
	idx := dev.Attrs().Index
	vtep := net.IP(podHost(j, 0).AsSlice())
	if err := h.NeighSet(&netlink.Neigh{
		LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
		IP: vtep, HardwareAddr: flannelMAC(j),
	}); err != nil {
		return fmt.Errorf("arp entry: %w", err)
	}
	if err := h.NeighSet(&netlink.Neigh{
		LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT,
		IP: net.IP(fl.seg.addr(j).AsSlice()), HardwareAddr: flannelMAC(j),
	}); err != nil {
		return fmt.Errorf("forwarding entry: %w", err)
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: ipn, Gw: vtep, Flags: int(netlink.FLAG_ONLINK)})
}

// close removes the pods (and their veths), cni0 and flannel.1 in every
// site, then the node network.
func (fl *flannelLink) close() error {
	var errs []error
	for _, s := range fl.tb.LocalSites() {
		if p, ok := fl.pods[s.Name()]; ok {
			if err := fl.tb.RemoveNamespace(p); err != nil {
				errs = append(errs, err)
			}
			delete(fl.pods, s.Name())
		}
		for _, n := range []string{"flannel.1", "cni0"} {
			if l, err := s.Netlink().LinkByName(n); err == nil {
				if err := s.Netlink().LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("%s on %s: delete %s: %w", fl.f.name(), s.Name(), n, err))
				}
			}
		}
	}
	errs = append(errs, fl.seg.close())
	return errors.Join(errs...)
}

// addrOn puts p on l.
func addrOn(h *netlink.Handle, l netlink.Link, p netip.Prefix) error {
	ipn := &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
		return fmt.Errorf("address %s on %s: %w", p, l.Attrs().Name, err)
	}
	return nil
}

var _ WANBypasser = (*Flannel)(nil)

// BypassesWAN: the nodes meet on one L2 network of their own (macvlan).
func (f *Flannel) BypassesWAN() string {
	return fmt.Sprintf("%s: the nodes meet on one L2 network, past the wan router: its rate, delay, jitter and loss would not apply", f.name())
}
