package datapath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// WireGuard implementations.
const (
	// WireGuardAuto uses the kernel module where present, else wireguard-go.
	WireGuardAuto = "auto"
	// WireGuardKernel uses the kernel module (CONFIG_WIREGUARD).
	WireGuardKernel = "kernel"
	// WireGuardUserspace uses wireguard-go over a TUN device.
	WireGuardUserspace = "userspace"
)

// WireGuardSocketDir is where wireguard-go puts its UAPI control sockets.
// It is shared by every network namespace on the host.
const WireGuardSocketDir = "/var/run/wireguard"

// wireguardOverhead is WireGuard's encapsulation overhead with an IPv6
// underlay (the conventional default; 60 on IPv4).
const wireguardOverhead = 80

// WireGuard joins every site to every other with WireGuard: a full mesh of
// peers (in the hub topology spokes peer with the hub only, and the hub
// forwards between them; in the chain each site peers with its
// neighbours, which forward), one device per site with an address in 198.19.1.0/24 (site i at
// .i+1). Keys are generated for each Setup and handed to the devices through
// wgctrl, never written to disk. In the gateway topology each peer's
// allowed IPs also hold the subnets behind it, routed into the device.
type WireGuard struct {
	// MTU of the WireGuard device; 0 means the underlay MTU less 80.
	MTU int
	// ListenPort is the UDP port every site listens on; 0 means 51820.
	ListenPort int
	// Implementation is WireGuardKernel, WireGuardUserspace or
	// WireGuardAuto ("" means auto).
	Implementation string
}

var (
	_ Datapath       = (*WireGuard)(nil)
	_ Checker        = (*WireGuard)(nil)
	_ GatewayChecker = (*WireGuard)(nil)
)

// WireGuardInfo registers WireGuard.
func WireGuardInfo() Info {
	return Info{
		Name:    "wireguard",
		Summary: "WireGuard full mesh between sites (kernel module, else wireguard-go)",
		Options: []scenario.Field{
			{Name: "mtu", Kind: scenario.KindInt, Doc: "WireGuard device MTU (0: underlay MTU less 80)", Default: int64(0), HasMin: true, Min: 0},
			{Name: "listen_port", Kind: scenario.KindInt, Doc: "UDP port each site listens on", Default: int64(51820), HasMin: true, Min: 1},
			{Name: "implementation", Kind: scenario.KindString, Doc: "kernel, userspace (wireguard-go) or auto (kernel where present)", Default: WireGuardAuto, Enum: []string{WireGuardAuto, WireGuardKernel, WireGuardUserspace}},
		},
		Components: wireguardComponents,
		New: func(o map[string]any) (Datapath, error) {
			impl, _ := o["implementation"].(string)
			w := &WireGuard{MTU: intOpt(o, "mtu"), ListenPort: intOpt(o, "listen_port"), Implementation: impl}
			if err := w.Validate(); err != nil {
				return nil, err
			}
			return w, nil
		},
	}
}

// Validate reports options that cannot work.
func (w *WireGuard) Validate() error {
	switch w.Implementation {
	case "", WireGuardAuto, WireGuardKernel, WireGuardUserspace:
	default:
		return fmt.Errorf("wireguard: implementation %q (want kernel, userspace or auto)", w.Implementation)
	}
	if w.ListenPort < 0 || w.ListenPort > 65535 {
		return fmt.Errorf("wireguard: listen_port %d (want 1..65535)", w.ListenPort)
	}
	if w.MTU < 0 || (w.MTU > 0 && w.MTU < 576) {
		return fmt.Errorf("wireguard: mtu %d (want 0 or at least 576)", w.MTU)
	}
	return nil
}

// WireGuardInterface is the name of the WireGuard device of site in run:
// "wg-<run>-<site>", or a hash of both when that exceeds the 15 characters
// Linux allows. It is unique per run and site because wireguard-go's control
// sockets share one directory across namespaces.
func WireGuardInterface(run, site string) string {
	if n := "wg-" + run + "-" + site; len(n) < unix.IFNAMSIZ {
		return n
	}
	h := sha256.Sum256([]byte(run + "\x00" + site))
	return "wg" + hex.EncodeToString(h[:])[:unix.IFNAMSIZ-3]
}

// WireGuardSocket is the UAPI control socket wireguard-go makes for ifname.
func WireGuardSocket(ifname string) string {
	return filepath.Join(WireGuardSocketDir, ifname+".sock")
}

// wgOverlayAddr is site i's address on the WireGuard overlay.
func wgOverlayAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 1, byte(i + 1)}) }

// CheckGateway accepts the gateway topology: allowed IPs carry the subnets
// behind each peer.
func (w *WireGuard) CheckGateway() error { return nil }

// Check reports whether the chosen implementation can run here.
func (w *WireGuard) Check(context.Context) error {
	_, err := w.implementation()
	return err
}

// implementation resolves auto to kernel or userspace, or says why the
// chosen one cannot run.
func (w *WireGuard) implementation() (string, error) {
	switch w.Implementation {
	case WireGuardKernel:
		return WireGuardKernel, checkWireGuardKernel()
	case WireGuardUserspace:
		return WireGuardUserspace, checkWireGuardGo()
	}
	kerr := checkWireGuardKernel()
	if kerr == nil {
		return WireGuardKernel, nil
	}
	uerr := checkWireGuardGo()
	if uerr == nil {
		return WireGuardUserspace, nil
	}
	if !errors.Is(kerr, ErrNotSupported) {
		return "", kerr
	}
	return "", fmt.Errorf("%w; and %w", kerr, uerr)
}

// checkWireGuardKernel creates a wireguard link in a scratch namespace.
func checkWireGuardKernel() error {
	return kernelPreflight("wireguard", "WIREGUARD", "a wireguard link", "Debian kernels ship it in linux-image-*; or use implementation userspace", func(h *netlink.Handle) error {
		return h.LinkAdd(&netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: "wg-check"}})
	})
}

// checkWireGuardGo looks for wireguard-go and the TUN device it needs.
func checkWireGuardGo() error {
	if _, err := exec.LookPath("wireguard-go"); err != nil {
		return notSupported("wireguard: userspace needs wireguard-go (Debian package wireguard-go): %v", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return notSupported("wireguard: userspace needs /dev/net/tun (kernel CONFIG_TUN): %v", err)
	}
	return nil
}

// wgSite is what Setup built in one site.
type wgSite struct {
	site   *netns.Site
	ifname string
	sock   string // userspace only
	key    wgtypes.Key
}

// Setup creates a WireGuard device in each site (a kernel link, or a TUN
// owned by a wireguard-go started in the site), gives each a fresh key, and
// makes every other site a peer: endpoint its underlay address and listen
// port, allowed IPs its overlay /32.
func (w *WireGuard) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("wireguard: needs the local network-namespace testbed")
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	impl, err := w.implementation()
	if err != nil {
		return nil, err
	}
	port := w.ListenPort
	if port == 0 {
		port = 51820
	}
	mtu := w.MTU
	if mtu == 0 {
		mtu = ltb.Spec().MTU - wireguardOverhead
	}
	run := ltb.Spec().Run
	sites := ltb.LocalSites()
	topo := TopologyOf(tb)
	via := make([]bool, len(sites))
	for k, ds := range transits(topo, len(sites)) {
		via[k] = len(ds) > 0
	}
	index := map[string]int{}
	built := make([]*wgSite, 0, len(sites))
	var daemons Daemons
	defer func() {
		if err != nil {
			wgTeardown(built, daemons)
		}
	}()
	for i, s := range sites {
		index[s.Name()] = i
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return nil, fmt.Errorf("wireguard: key for %s: %w", s.Name(), err)
		}
		ws := &wgSite{site: s, ifname: WireGuardInterface(run, s.Name()), key: k}
		built = append(built, ws)
		if impl == WireGuardKernel {
			la := netlink.LinkAttrs{Name: ws.ifname, MTU: mtu}
			if err := s.Netlink().LinkAdd(&netlink.Wireguard{LinkAttrs: la}); err != nil {
				return nil, fmt.Errorf("wireguard on %s: add %s: %w", s.Name(), ws.ifname, err)
			}
			continue
		}
		ws.sock = WireGuardSocket(ws.ifname)
		// Recorded before the daemon starts, so `spanperf clean` removes the
		// socket a killed wireguard-go leaves in the shared directory.
		if err := ltb.Ledger().Add(testbed.Entry{Kind: testbed.KindPath, Path: ws.sock}); err != nil {
			return nil, fmt.Errorf("wireguard on %s: %w", s.Name(), err)
		}
		cmd := testbed.Command{
			Name: "wireguard-go",
			Path: "wireguard-go",
			Args: []string{"-f", ws.ifname},
			Env:  []string{"WG_PROCESS_FOREGROUND=1"},
		}
		ready := func() error {
			if _, err := os.Stat(ws.sock); err != nil {
				return fmt.Errorf("no control socket: %w", err)
			}
			if _, err := s.Netlink().LinkByName(ws.ifname); err != nil {
				return fmt.Errorf("no link %s: %w", ws.ifname, err)
			}
			return nil
		}
		d, err := StartDaemon(ctx, "wireguard", "tunnel", s, cmd, ready, 10*time.Second)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
	}
	for i, ws := range built {
		h := ws.site.Netlink()
		dev, err := h.LinkByName(ws.ifname)
		if err != nil {
			return nil, fmt.Errorf("wireguard on %s: %w", ws.site.Name(), err)
		}
		if err := h.LinkSetMTU(dev, mtu); err != nil {
			return nil, fmt.Errorf("wireguard on %s: mtu %d: %w", ws.site.Name(), mtu, err)
		}
		a := wgOverlayAddr(i)
		ipn := &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(24, 32)}
		if err := h.AddrAdd(dev, &netlink.Addr{IPNet: ipn}); err != nil {
			return nil, fmt.Errorf("wireguard on %s: address: %w", ws.site.Name(), err)
		}
		if err := wgConfigure(ws, wgPeers(topo, built, i, port), port); err != nil {
			return nil, err
		}
		if via[i] {
			if err := wgForward(ws); err != nil {
				return nil, err
			}
		}
		if err := h.LinkSetUp(dev); err != nil {
			return nil, fmt.Errorf("wireguard on %s: up: %w", ws.site.Name(), err)
		}
		for j, peer := range built {
			if j == i {
				continue
			}
			if err := routeBehind(h, dev, peer.site, netip.Addr{}); err != nil {
				return nil, fmt.Errorf("wireguard on %s: %w", ws.site.Name(), err)
			}
		}
	}
	components := daemons.Components()
	if impl == WireGuardKernel {
		components = []results.Component{{Name: "kernel", Role: "tunnel"}}
	}
	closed := false
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(wgOverlayAddr(index[to.Name()]), uint16(port))
		}),
		Components: components,
		Alive:      daemons.Alive,
		Expose:     wgExpose(topo, built, port),
		Close: func(context.Context) error {
			if closed {
				return nil
			}
			closed = true
			return wgTeardown(built, daemons)
		},
	}, nil
}

// wgPeers is site i's view of the sites it joins directly in topology
// (every other site in the mesh): for each, its endpoint, and as allowed
// IPs the overlay /32 of every site reached through it (its own, and in
// the hub and chain those beyond it) with the subnets behind them.
func wgPeers(topology string, built []*wgSite, i, port int) []wgtypes.PeerConfig {
	var peers []wgtypes.PeerConfig
	for _, j := range neighbours(topology, len(built), i) {
		p := built[j]
		var allowed []net.IPNet
		for d, far := range built {
			if d == i || nextHop(topology, len(built), i, d) != j {
				continue
			}
			allowed = append(allowed, net.IPNet{IP: net.IP(wgOverlayAddr(d).AsSlice()), Mask: net.CIDRMask(32, 32)})
			for _, b := range far.site.Behind() {
				allowed = append(allowed, net.IPNet{IP: net.IP(b.Addr().AsSlice()), Mask: net.CIDRMask(b.Bits(), b.Addr().BitLen())})
			}
		}
		peers = append(peers, wgtypes.PeerConfig{
			PublicKey:         p.key.PublicKey(),
			Endpoint:          &net.UDPAddr{IP: net.IP(p.site.Addr().AsSlice()), Port: port},
			ReplaceAllowedIPs: true,
			AllowedIPs:        allowed,
		})
	}
	return peers
}

// wgConfigure hands ws its key, port and peers. wgctrl is opened inside the
// site so that its netlink socket (kernel devices) lives in the site's
// namespace; userspace devices are reached through their socket path, which
// any namespace sees.
func wgConfigure(ws *wgSite, peers []wgtypes.PeerConfig, port int) error {
	err := ws.site.Do(func() error {
		c, err := wgctrl.New()
		if err != nil {
			return err
		}
		defer c.Close()
		return c.ConfigureDevice(ws.ifname, wgtypes.Config{
			PrivateKey:   &ws.key,
			ListenPort:   &port,
			ReplacePeers: true,
			Peers:        peers,
		})
	})
	if err != nil {
		return fmt.Errorf("wireguard on %s: configure %s: %w", ws.site.Name(), ws.ifname, err)
	}
	return nil
}

// wgTeardown stops the daemons, then removes every device and control
// socket Setup made. A device whose wireguard-go has exited is already gone.
func wgTeardown(built []*wgSite, daemons Daemons) error {
	daemons.Stop(2 * time.Second)
	var errs []error
	for _, ws := range built {
		if h := ws.site.Netlink(); h != nil {
			if l, err := h.LinkByName(ws.ifname); err == nil {
				if err := h.LinkDel(l); err != nil {
					errs = append(errs, fmt.Errorf("wireguard on %s: delete %s: %w", ws.site.Name(), ws.ifname, err))
				}
			}
		}
		if ws.sock != "" {
			if err := os.Remove(ws.sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("wireguard on %s: %w", ws.site.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
