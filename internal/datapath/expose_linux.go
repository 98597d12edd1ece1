package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var (
	_ Exposer = Native{}
	_ Exposer = (*WireGuard)(nil)
)

// exposeSeq numbers the services exposed after setup, for fresh addresses
// and ports.
var exposeSeq atomic.Uint32

// ServiceAddrPrefix holds the addresses given to services exposed after
// setup (discovery): one new address per exposure, on the server site's
// loopback device.
var ServiceAddrPrefix = netip.MustParsePrefix("198.19.50.0/24")

// freshServiceAddr returns the next address of ServiceAddrPrefix (.1 to
// .250, then again from .1: an exposure is undone before the next).
func freshServiceAddr() netip.Addr {
	n := exposeSeq.Add(1)%250 + 1
	b := ServiceAddrPrefix.Addr().As4()
	b[3] = byte(n)
	return netip.AddrFrom4(b)
}

// hostNet is a as a /32 (or /128) net.IPNet.
func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// loAddr adds (add) or removes a as a host address on site's loopback.
func loAddr(site *netns.Site, a netip.Addr, add bool) error {
	h := site.Netlink()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("site %s: %w", site.Name(), err)
	}
	addr := &netlink.Addr{IPNet: hostNet(a)}
	if add {
		err = h.AddrAdd(lo, addr)
	} else {
		err = h.AddrDel(lo, addr)
	}
	if err != nil {
		return fmt.Errorf("site %s: address %s on lo: %w", site.Name(), a, err)
	}
	return nil
}

// CanExpose: native exposes a service on a new address with a route to it.
func (Native) CanExpose(string) error { return nil }

// nativeExpose is native's Link.Expose on a direct local testbed: the
// service gets a new address on the server site's loopback, and the wan
// router a route to it via the site (the sites' default route is the wan
// router).
func nativeExpose(tb *netns.Testbed) ExposeFunc {
	return func(_ context.Context, to testbed.Site, port int) (*Exposure, error) {
		site, ok := to.(*netns.Site)
		if !ok {
			return nil, fmt.Errorf("native: expose on %s: not a local site", to.Name())
		}
		a := freshServiceAddr()
		if err := loAddr(site, a, true); err != nil {
			return nil, fmt.Errorf("native: expose: %w", err)
		}
		r := &netlink.Route{Dst: hostNet(a), Gw: net.IP(site.Addr().AsSlice())}
		if err := tb.WAN().Netlink().RouteAdd(r); err != nil {
			loAddr(site, a, false)
			return nil, fmt.Errorf("native: expose: wan route %s via %s: %w", a, site.Name(), err)
		}
		target := testbed.AddrTarget(netip.AddrPortFrom(a, uint16(port)))
		done := false
		return &Exposure{
			Target: func(testbed.Site) testbed.Target { return target },
			Undo: func(context.Context) error {
				if done {
					return nil
				}
				done = true
				var errs []error
				if err := tb.WAN().Netlink().RouteDel(r); err != nil {
					errs = append(errs, fmt.Errorf("native: unexpose: wan route %s: %w", a, err))
				}
				if err := loAddr(site, a, false); err != nil {
					errs = append(errs, fmt.Errorf("native: unexpose: %w", err))
				}
				return errors.Join(errs...)
			},
		}, nil
	}
}

// CanExpose: wireguard exposes a service on a new address, added to the
// allowed IPs of the peer toward the server site everywhere else, in
// every topology it builds.
func (w *WireGuard) CanExpose(string) error { return nil }

// wgExpose is wireguard's Link.Expose: the service gets a new address on
// the server site's loopback; every other site adds it to the allowed IPs
// of its peer toward the server site in topology (the server site itself
// in the mesh, the next hop in the hub and chain) and routes it into its
// WireGuard device. Undo puts the peers' allowed IPs back as Setup made
// them.
func wgExpose(topology string, built []*wgSite, port int) ExposeFunc {
	return func(_ context.Context, to testbed.Site, sport int) (_ *Exposure, err error) {
		j := -1
		for i, ws := range built {
			if ws.site.Name() == to.Name() {
				j = i
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("wireguard: expose: %s is not a site of the datapath", to.Name())
		}
		a := freshServiceAddr()
		if err := loAddr(built[j].site, a, true); err != nil {
			return nil, fmt.Errorf("wireguard: expose: %w", err)
		}
		var undo []func() error
		undo = append(undo, func() error { return loAddr(built[j].site, a, false) })
		runUndo := func() error {
			var errs []error
			for k := len(undo) - 1; k >= 0; k-- {
				errs = append(errs, undo[k]())
			}
			undo = nil
			return errors.Join(errs...)
		}
		defer func() {
			if err != nil {
				runUndo()
			}
		}()
		for i, ws := range built {
			if i == j {
				continue
			}
			pub := built[nextHop(topology, len(built), i, j)].key.PublicKey()
			if err := wgUpdatePeer(ws, wgtypes.PeerConfig{PublicKey: pub, UpdateOnly: true, AllowedIPs: []net.IPNet{*hostNet(a)}}); err != nil {
				return nil, err
			}
			var orig wgtypes.PeerConfig
			for _, p := range wgPeers(topology, built, i, port) {
				if p.PublicKey == pub {
					orig = p
				}
			}
			orig.Endpoint, orig.UpdateOnly = nil, true
			undo = append(undo, func() error { return wgUpdatePeer(ws, orig) })
			h := ws.site.Netlink()
			dev, err := h.LinkByName(ws.ifname)
			if err != nil {
				return nil, fmt.Errorf("wireguard: expose on %s: %w", ws.site.Name(), err)
			}
			r := &netlink.Route{LinkIndex: dev.Attrs().Index, Dst: hostNet(a)}
			if err := h.RouteAdd(r); err != nil {
				return nil, fmt.Errorf("wireguard: expose on %s: route %s: %w", ws.site.Name(), a, err)
			}
			undo = append(undo, func() error { return h.RouteDel(r) })
		}
		target := testbed.AddrTarget(netip.AddrPortFrom(a, uint16(sport)))
		return &Exposure{
			Target: func(testbed.Site) testbed.Target { return target },
			Undo: func(context.Context) error {
				if err := runUndo(); err != nil {
					return fmt.Errorf("wireguard: unexpose %s: %w", a, err)
				}
				return nil
			},
		}, nil
	}
}

// wgUpdatePeer applies one peer's change to ws's device, leaving its key,
// port and other peers alone.
func wgUpdatePeer(ws *wgSite, p wgtypes.PeerConfig) error {
	err := ws.site.Do(func() error {
		c, err := wgctrl.New()
		if err != nil {
			return err
		}
		defer c.Close()
		return c.ConfigureDevice(ws.ifname, wgtypes.Config{Peers: []wgtypes.PeerConfig{p}})
	})
	if err != nil {
		return fmt.Errorf("wireguard on %s: update peer of %s: %w", ws.site.Name(), ws.ifname, err)
	}
	return nil
}

// siteIndex returns the index of s in sites (dp names the datapath in the
// error when it is not there).
func siteIndex(dp string, sites []*netns.Site, s testbed.Site) (int, error) {
	for i, st := range sites {
		if st.Name() == s.Name() {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%s: %s is not a site of the datapath", dp, s.Name())
}

// redundantSites returns the indexes in sites of a redundant route's
// client site from and its server sites to, refusing a client site that
// serves too.
func redundantSites(dp string, sites []*netns.Site, from testbed.Site, to []testbed.Site) (int, []int, error) {
	i, err := siteIndex(dp, sites, from)
	if err != nil {
		return -1, nil, err
	}
	var servers []int
	for _, s := range to {
		j, err := siteIndex(dp, sites, s)
		if err != nil {
			return -1, nil, err
		}
		if j == i {
			return -1, nil, fmt.Errorf("%s: failover: the client's site %s serves too", dp, s.Name())
		}
		servers = append(servers, j)
	}
	return i, servers, nil
}
