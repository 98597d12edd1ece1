package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var _ Exposer = (*Tunnel)(nil)

// CanExpose: a kernel tunnel exposes a service on a new address, routed
// into the tunnel device toward the server site everywhere else, in every
// topology it builds.
func (t *Tunnel) CanExpose(string) error { return nil }

// exposeFunc is a kernel tunnel's Link.Expose: the service gets a new
// address on the server site's loopback, and every other site a route to
// it into its tunnel device, via the server site's overlay address (vxlan,
// geneve) or straight in (the point-to-point kinds). Undo removes both.
func (t *Tunnel) exposeFunc(sites []*netns.Site) ExposeFunc {
	return func(_ context.Context, to testbed.Site, port int) (_ *Exposure, err error) {
		server := -1
		for i, s := range sites {
			if s.Name() == to.Name() {
				server = i
			}
		}
		if server < 0 {
			return nil, fmt.Errorf("%s: expose on %s: not a site of the datapath", t.Kind, to.Name())
		}
		a := freshServiceAddr()
		if err := loAddr(sites[server], a, true); err != nil {
			return nil, fmt.Errorf("%s: expose: %w", t.Kind, err)
		}
		type placed struct {
			h *netlink.Handle
			r *netlink.Route
		}
		var routes []placed
		undo := func() error {
			var errs []error
			for _, p := range routes {
				if err := p.h.RouteDel(p.r); err != nil {
					errs = append(errs, fmt.Errorf("%s: unexpose: route %s: %w", t.Kind, a, err))
				}
			}
			routes = nil
			if err := loAddr(sites[server], a, false); err != nil {
				errs = append(errs, fmt.Errorf("%s: unexpose: %w", t.Kind, err))
			}
			return errors.Join(errs...)
		}
		defer func() {
			if err != nil {
				undo()
			}
		}()
		for i, s := range sites {
			if i == server {
				continue
			}
			h := s.Netlink()
			dev, err := h.LinkByName(t.device())
			if err != nil {
				return nil, fmt.Errorf("%s: expose on %s: %w", t.Kind, s.Name(), err)
			}
			r := &netlink.Route{LinkIndex: dev.Attrs().Index, Dst: hostNet(a)}
			if t.Kind == "vxlan" || t.Kind == "geneve" {
				r.Gw = net.IP(overlayAddr(server).AsSlice())
			}
			if err := h.RouteAdd(r); err != nil {
				return nil, fmt.Errorf("%s: expose on %s: route %s: %w", t.Kind, s.Name(), a, err)
			}
			routes = append(routes, placed{h, r})
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
				return undo()
			},
		}, nil
	}
}
