package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// OVS joins two sites with Open vSwitch: in each site its own ovsdb-server
// and ovs-vswitchd, running in the foreground inside the site, with every
// file under a directory of the testbed's temp dir. Bridge br-int carries
// the overlay address (198.19.3.x for vxlan, 198.19.4.x for geneve) and a
// tunnel port to the other site's underlay address.
//
// With the userspace datapath (netdev) the underlay address moves from eth0
// to bridge br-phy, which has eth0 as a port, so that ovs-vswitchd itself
// encapsulates (tnl_push) and decapsulates (tnl_pop) every packet. With the
// kernel datapath (system) eth0 keeps its address and the openvswitch
// module switches.
type OVS struct {
	// Tunnel is "geneve" or "vxlan".
	Tunnel string
	// Datapath is "netdev" (userspace), "system" (kernel module) or "auto"
	// (system where the kernel has the openvswitch module and the tunnel
	// kind, else netdev).
	Datapath string
	// MTU of br-int; 0 means the underlay MTU less 50.
	MTU int
	// Key is the tunnel's virtual network identifier.
	Key int
}

var (
	_ Datapath       = (*OVS)(nil)
	_ Checker        = (*OVS)(nil)
	_ GatewayChecker = (*OVS)(nil)
)

// OVSInfo registers OVS with tunnel kind "geneve" or "vxlan".
func OVSInfo(tunnel, summary string) Info {
	return Info{
		Name:    "ovs-" + tunnel,
		Summary: summary,
		Options: []scenario.Field{
			{Name: "datapath", Kind: scenario.KindString, Default: "auto", Enum: []string{"auto", "netdev", "system"}, Doc: "netdev: ovs-vswitchd switches and tunnels in userspace; system: the openvswitch kernel module does; auto: system where the kernel has it, else netdev"},
			{Name: "mtu", Kind: scenario.KindInt, Default: int64(0), HasMin: true, Min: 0, Doc: "overlay MTU on br-int (0: underlay MTU less 50)"},
			{Name: "key", Kind: scenario.KindInt, Default: int64(42), HasMin: true, Min: 1, Doc: "tunnel key (the VNI)"},
		},
		Components: ovsComponents,
		New: func(o map[string]any) (Datapath, error) {
			d := &OVS{Tunnel: tunnel, Datapath: "auto", MTU: intOpt(o, "mtu"), Key: intOpt(o, "key")}
			if s, ok := o["datapath"].(string); ok && s != "" {
				d.Datapath = s
			}
			if d.Key == 0 {
				d.Key = 42
			}
			return d, nil
		},
	}
}

func (d *OVS) name() string { return "ovs-" + d.Tunnel }

// ovsOverlayAddr is site i's address on br-int.
func (d *OVS) overlayAddr(i int) netip.Addr {
	k := byte(4)
	if d.Tunnel == "vxlan" {
		k = 3
	}
	return netip.AddrFrom4([4]byte{198, 19, k, byte(i + 1)})
}

const ovsSchema = "/usr/share/openvswitch/vswitch.ovsschema"

// ovsPrograms are what every OVS datapath runs, with their Debian packages.
var ovsPrograms = [][2]string{
	{"ovsdb-server", "openvswitch-common"},
	{"ovsdb-tool", "openvswitch-common"},
	{"ovs-appctl", "openvswitch-common"},
	{"ovs-vswitchd", "openvswitch-switch"},
	{"ovs-vsctl", "openvswitch-switch"},
}

// CheckGateway: OVS ends its tunnel in the site, which then routes the
// node subnets behind its peer over br-int.
func (d *OVS) CheckGateway() error { return nil }

// MaxSites is 2: the switches are wired point to point.
func (d *OVS) MaxSites() int { return 2 }

// Check looks for the OVS programs and, for the datapath asked, TUN and
// ethtool (netdev) or the openvswitch kernel module (system).
func (d *OVS) Check(context.Context) error {
	for _, p := range ovsPrograms {
		if _, err := exec.LookPath(p[0]); err != nil {
			return notSupported("%s: %s not found (Debian package %s)", d.name(), p[0], p[1])
		}
	}
	if _, err := os.Stat(ovsSchema); err != nil {
		return notSupported("%s: no %s (Debian package openvswitch-switch)", d.name(), ovsSchema)
	}
	switch d.Datapath {
	case "system":
		return d.checkSystem()
	case "netdev", "auto":
		return d.checkNetdev()
	}
	return fmt.Errorf("%s: datapath %q: want auto, netdev or system", d.name(), d.Datapath)
}

func (d *OVS) checkNetdev() error {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return notSupported("%s: userspace datapath needs /dev/net/tun (kernel CONFIG_TUN): %v", d.name(), err)
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		return notSupported("%s: ethtool not found (Debian package ethtool)", d.name())
	}
	return nil
}

// checkSystem needs the openvswitch module (loading it if need be) and the
// kernel's own tunnel device for the vport.
func (d *OVS) checkSystem() error {
	if _, err := netlink.GenlFamilyGet("ovs_datapath"); err != nil {
		if _, serr := os.Stat("/sys/module/openvswitch"); serr != nil {
			out, merr := exec.Command("modprobe", "openvswitch").CombinedOutput()
			if merr != nil {
				return notSupported("%s: datapath system needs the openvswitch kernel module (CONFIG_OPENVSWITCH): /sys/module/openvswitch is absent and modprobe failed: %v: %s",
					d.name(), merr, strings.TrimSpace(string(out)))
			}
		}
		if _, err := netlink.GenlFamilyGet("ovs_datapath"); err != nil {
			return notSupported("%s: datapath system: the kernel has no ovs_datapath netlink family (CONFIG_OPENVSWITCH): %v", d.name(), err)
		}
	}
	t := &Tunnel{Kind: d.Tunnel, VNI: d.Key}
	if err := t.Check(context.Background()); err != nil {
		return fmt.Errorf("%s: datapath system: %w", d.name(), err)
	}
	return nil
}

// resolve turns auto into system or netdev.
func (d *OVS) resolve() string {
	if d.Datapath != "auto" {
		return d.Datapath
	}
	if d.checkSystem() == nil {
		return "system"
	}
	return "netdev"
}

// ovsSite is one site's switch.
type ovsSite struct {
	site    *netns.Site
	index   int
	dir     string
	db      *Daemon
	switchd *Daemon
	moved   bool // the underlay address is on br-phy
	txOff   bool // eth0's tx checksum offload was turned off
}

func (s *ovsSite) sock() string { return filepath.Join(s.dir, "db.sock") }
func (s *ovsSite) env() []string {
	return []string{"OVS_RUNDIR=" + s.dir, "OVS_LOGDIR=" + s.dir, "OVS_DBDIR=" + s.dir, "OVS_SYSCONFDIR=" + s.dir}
}

// vsctl runs ovs-vsctl against the site's database. It waits for
// ovs-vswitchd to apply the change unless args start with --no-wait.
func (s *ovsSite) vsctl(ctx context.Context, args ...string) error {
	return s.tool(ctx, "ovs-vsctl", append([]string{"--db=unix:" + s.sock(), "--timeout=60"}, args...)...)
}

// tool runs an OVS command-line tool (they reach the daemons over unix
// sockets, so they need not run inside the site).
func (s *ovsSite) tool(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), s.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Setup starts the switches in both sites and wires the overlay.
func (d *OVS) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("%s: needs the local network-namespace testbed", d.name())
	}
	if err := d.Check(ctx); err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	if len(sites) != 2 {
		return nil, fmt.Errorf("%s: joins exactly 2 sites, the testbed has %d", d.name(), len(sites))
	}
	dp := d.resolve()
	mtu := d.MTU
	if mtu == 0 {
		mtu = ltb.Spec().MTU - 50
	}
	st := make([]*ovsSite, 0, len(sites))
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = d.teardown(cctx, ltb, st)
		}
	}()
	for i, s := range sites {
		site := &ovsSite{site: s, index: i, dir: filepath.Join(ltb.TempDir(), d.name()+"-"+s.Name())}
		st = append(st, site)
		if err := d.start(ctx, site); err != nil {
			return nil, err
		}
	}
	for i, s := range st {
		if err := d.wire(ctx, ltb, s, sites[1-i].Addr(), dp, mtu); err != nil {
			return nil, err
		}
		// Gateway topology: the peer's node subnet goes over the tunnel.
		h := s.site.Netlink()
		br, err := h.LinkByName("br-int")
		if err == nil {
			err = routeBehind(h, br, sites[1-i], d.overlayAddr(1-i))
		}
		if err != nil {
			return nil, fmt.Errorf("%s on site %s: %w", d.name(), s.site.Name(), err)
		}
	}
	var daemons Daemons
	var comps []results.Component
	for _, s := range st {
		daemons = append(daemons, s.db, s.switchd)
		comps = append(comps, s.switchd.Component())
	}
	// The kernel carries the packets too: veth and TAP (netdev) or the
	// whole switching path (system).
	comps = append(comps, KernelComponent())
	closed := false
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(d.overlayAddr(index(sites, to)), uint16(port))
		}),
		Components: comps,
		Alive:      daemons.Alive,
		Close: func(ctx context.Context) error {
			if closed {
				return nil
			}
			closed = true
			return d.teardown(ctx, ltb, st)
		},
	}, nil
}

// start creates the site's database and starts ovsdb-server and
// ovs-vswitchd inside the site.
func (d *OVS) start(ctx context.Context, s *ovsSite) error {
	name := s.site.Name()
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("%s on site %s: %w", d.name(), name, err)
	}
	db := filepath.Join(s.dir, "conf.db")
	if err := s.tool(ctx, "ovsdb-tool", "create", db, ovsSchema); err != nil {
		return fmt.Errorf("%s on site %s: %w", d.name(), name, err)
	}
	var err error
	s.db, err = StartDaemon(ctx, d.name(), "control", s.site, testbed.Command{
		Name: "ovsdb-server", Path: "ovsdb-server",
		Args: []string{db, "--remote=punix:" + s.sock(),
			"--pidfile=" + filepath.Join(s.dir, "ovsdb-server.pid"),
			"--unixctl=" + filepath.Join(s.dir, "ovsdb-server.ctl")},
		Env: s.env(),
	}, dialUnix(s.sock()), 30*time.Second)
	if err != nil {
		return err
	}
	if err := s.vsctl(ctx, "--no-wait", "init"); err != nil {
		return fmt.Errorf("%s on site %s: %w", d.name(), name, err)
	}
	ctl := filepath.Join(s.dir, "ovs-vswitchd.ctl")
	s.switchd, err = StartDaemon(ctx, d.name(), "switch", s.site, testbed.Command{
		Name: "ovs-vswitchd", Path: "ovs-vswitchd",
		Args: []string{"unix:" + s.sock(),
			"--pidfile=" + filepath.Join(s.dir, "ovs-vswitchd.pid"),
			"--unixctl=" + ctl},
		Env: s.env(),
	}, func() error {
		if err := dialUnix(ctl)(); err != nil {
			return err
		}
		return s.tool(ctx, "ovs-appctl", "-t", ctl, "--timeout=5", "version")
	}, 60*time.Second)
	return err
}

// dialUnix returns a readiness check: something accepts on the socket.
func dialUnix(path string) func() error {
	return func() error {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// wire builds the bridges of one site and moves addresses onto them.
func (d *OVS) wire(ctx context.Context, tb *netns.Testbed, s *ovsSite, peer netip.Addr, dp string, mtu int) error {
	name := s.site.Name()
	fail := func(err error) error { return fmt.Errorf("%s on site %s: %w", d.name(), name, err) }
	h := s.site.Netlink()
	tunnel := []string{"--", "add-port", "br-int", "tun0", "--", "set", "interface", "tun0", "type=" + d.Tunnel,
		"options:remote_ip=" + peer.String(), "options:key=" + strconv.Itoa(d.Key)}
	intBr := []string{"--", "add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=" + dp,
		"--", "set", "interface", "br-int", "mtu_request=" + strconv.Itoa(mtu)}
	if dp == "netdev" {
		// AF_PACKET on a veth sees packets whose checksum the sender left
		// to offload; OVS would forward them unfinished.
		if err := d.ethtool(ctx, s, "off"); err != nil {
			return fail(err)
		}
		s.txOff = true
		args := []string{"add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
			"--", "add-port", "br-phy", "eth0"}
		args = append(append(args, intBr...), tunnel...)
		if err := s.vsctl(ctx, args...); err != nil {
			return fail(err)
		}
		if err := d.moveUnderlay(tb, s); err != nil {
			return fail(err)
		}
		s.moved = true
	} else if err := s.vsctl(ctx, append(intBr[1:], tunnel...)...); err != nil {
		return fail(err)
	}
	br, err := waitLink(h, "br-int")
	if err != nil {
		return fail(err)
	}
	a := d.overlayAddr(s.index)
	if err := h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(24, 32)}}); err != nil {
		return fail(fmt.Errorf("address on br-int: %w", err))
	}
	if err := h.LinkSetUp(br); err != nil {
		return fail(fmt.Errorf("br-int up: %w", err))
	}
	return nil
}

// waitLink waits for ovs-vswitchd to create device name.
func waitLink(h *netlink.Handle, name string) (netlink.Link, error) {
	var err error
	for range 250 {
		var l netlink.Link
		if l, err = h.LinkByName(name); err == nil {
			return l, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("device %s never appeared: %w", name, err)
}

// moveUnderlay moves the site's underlay address and default route from
// eth0 to br-phy. eth0 stops answering ARP for the address (arp_ignore 8),
// and the wan router forgets eth0's MAC, so frames for the site are
// addressed to br-phy and the kernel ignores their copies on eth0.
func (d *OVS) moveUnderlay(tb *netns.Testbed, s *ovsSite) error {
	h := s.site.Netlink()
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	br, err := waitLink(h, "br-phy")
	if err != nil {
		return err
	}
	addr := underlayAddr(s.site)
	if err := h.AddrDel(eth, addr); err != nil {
		return fmt.Errorf("remove address from eth0: %w", err)
	}
	if err := setARPIgnore(s.site, "8"); err != nil {
		return err
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("br-phy up: %w", err)
	}
	if err := h.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("address on br-phy: %w", err)
	}
	if err := defaultRoute(s.site, br); err != nil {
		return err
	}
	forgetNeighbour(tb, s.site.Addr())
	return nil
}

// restoreUnderlay gives the underlay address and default route back to
// eth0 (br-phy is gone).
func (d *OVS) restoreUnderlay(tb *netns.Testbed, s *ovsSite) error {
	h := s.site.Netlink()
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return err
	}
	if err := h.AddrReplace(eth, underlayAddr(s.site)); err != nil {
		return fmt.Errorf("address back on eth0: %w", err)
	}
	if err := setARPIgnore(s.site, "0"); err != nil {
		return err
	}
	if err := defaultRoute(s.site, eth); err != nil {
		return err
	}
	forgetNeighbour(tb, s.site.Addr())
	return nil
}

func underlayAddr(s *netns.Site) *netlink.Addr {
	p := s.Prefix()
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}}
}

func setARPIgnore(s *netns.Site, v string) error {
	if err := s.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/eth0/arp_ignore", []byte(v), 0o644)
	}); err != nil {
		return fmt.Errorf("arp_ignore on eth0: %w", err)
	}
	return nil
}

// defaultRoute routes the site's default via the wan router (.1 of its
// underlay prefix) through dev.
func defaultRoute(s *netns.Site, dev netlink.Link) error {
	gw := s.Prefix().Masked().Addr().Next()
	if err := s.Netlink().RouteReplace(&netlink.Route{LinkIndex: dev.Attrs().Index, Gw: net.IP(gw.AsSlice())}); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, dev.Attrs().Name, err)
	}
	return nil
}

// forgetNeighbour drops the wan router's ARP entry for a, which names the
// MAC of the device that had the address.
func forgetNeighbour(tb *netns.Testbed, a netip.Addr) {
	wan := tb.WAN()
	if wan == nil {
		return
	}
	neighs, _ := wan.Netlink().NeighList(0, netlink.FAMILY_V4)
	for _, n := range neighs {
		if n.IP.Equal(net.IP(a.AsSlice())) {
			_ = wan.Netlink().NeighDel(&n)
		}
	}
}

// ethtool sets eth0's tx checksum offload in site s.
func (d *OVS) ethtool(ctx context.Context, s *ovsSite, state string) error {
	p, err := s.site.Exec(ctx, testbed.Command{Name: "ethtool", Path: "ethtool", Args: []string{"-K", "eth0", "tx", state}})
	if err != nil {
		return err
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("ethtool -K eth0 tx %s: %w", state, err)
	}
	return nil
}

// teardown removes the bridges and datapath, stops the daemons, puts the
// underlay back on eth0 and removes the sites' directories.
func (d *OVS) teardown(ctx context.Context, tb *netns.Testbed, st []*ovsSite) error {
	var errs []error
	for _, s := range st {
		fail := func(err error) {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s on site %s: %w", d.name(), s.site.Name(), err))
			}
		}
		if s.switchd != nil && s.switchd.Alive() == nil {
			// --cleanup deletes the datapath and its ports, which
			// outlive ovs-vswitchd in the kernel datapath.
			if s.db != nil && s.db.Alive() == nil {
				fail(s.vsctl(ctx, "--if-exists", "del-br", "br-int", "--", "--if-exists", "del-br", "br-phy"))
			}
			fail(s.tool(ctx, "ovs-appctl", "-t", filepath.Join(s.dir, "ovs-vswitchd.ctl"), "--timeout=10", "exit", "--cleanup"))
			select {
			case <-s.switchd.Process.Done():
			case <-time.After(5 * time.Second):
			}
		}
		for _, dm := range []*Daemon{s.switchd, s.db} {
			if dm != nil {
				dm.Process.Stop(2 * time.Second)
			}
		}
		h := s.site.Netlink()
		for _, dev := range []string{"br-int", "br-phy", "ovs-netdev", "ovs-system", "genev_sys_6081", "vxlan_sys_4789"} {
			if l, err := h.LinkByName(dev); err == nil {
				fail(h.LinkDel(l))
			}
		}
		if s.moved {
			fail(d.restoreUnderlay(tb, s))
		}
		if s.txOff {
			fail(d.ethtool(ctx, s, "on"))
		}
		fail(os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}
