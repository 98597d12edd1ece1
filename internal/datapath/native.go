package datapath

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// Native routes between sites over the underlay with no overlay: the
// baseline. In the gateway topology the wan router also routes the subnets
// behind each site to it, so traffic goes node → gateway → wan → gateway →
// node in the clear: the baseline of that topology.
type Native struct{}

var (
	_ Datapath       = Native{}
	_ GatewayChecker = Native{}
)

// NativeInfo registers Native.
func NativeInfo() Info {
	return Info{
		Name:    "native",
		Summary: "sites route to each other over the underlay, no overlay (the baseline)",
		New:     func(map[string]any) (Datapath, error) { return Native{}, nil },
	}
}

// CheckGateway accepts the gateway topology: the wan router routes the
// subnets behind the sites.
func (Native) CheckGateway() error { return nil }

// Setup builds nothing in the direct topology: the testbed already routes
// between sites. In the gateway topology it adds, in the wan router, a route
// to each subnet behind a site via that site's underlay address.
func (Native) Setup(_ context.Context, tb testbed.Testbed) (*Link, error) {
	var routes []*netlink.Route
	var wan *netlink.Handle
	if ltb, ok := tb.(*netns.Testbed); ok && ltb.Topology() == testbed.TopologyGateway {
		wan = ltb.WAN().Netlink()
		for _, s := range ltb.LocalSites() {
			for _, p := range s.Behind() {
				r := &netlink.Route{
					Dst: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
					Gw:  net.IP(s.Addr().AsSlice()),
				}
				if err := wan.RouteAdd(r); err != nil {
					delRoutes(wan, routes)
					return nil, fmt.Errorf("native: wan route %s behind %s: %w", p, s.Name(), err)
				}
				routes = append(routes, r)
			}
		}
	}
	var expose ExposeFunc
	if ltb, ok := tb.(*netns.Testbed); ok && ltb.Topology() != testbed.TopologyGateway {
		expose = nativeExpose(ltb)
	}
	return &Link{
		Target:     AddrTargets(UnderlayTarget),
		Expose:     expose,
		Components: []results.Component{KernelComponent()},
		Close: func(context.Context) error {
			err := delRoutes(wan, routes)
			routes = nil
			return err
		},
	}, nil
}

// delRoutes deletes routes through h.
func delRoutes(h *netlink.Handle, routes []*netlink.Route) error {
	var errs []error
	for _, r := range routes {
		if err := h.RouteDel(r); err != nil {
			errs = append(errs, fmt.Errorf("native: delete wan route %s: %w", r.Dst, err))
		}
	}
	return errors.Join(errs...)
}
