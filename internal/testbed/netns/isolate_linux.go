package netns

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// isolatePriority is the priority of Isolate's rules in the wan router:
// ahead of the WAN emulator's (which send sites' packets to its table).
const isolatePriority = 50

// Isolate cuts site s off the underlay, as if its gateway died: the wan
// router silently drops every packet from s and to it (its address and
// the subnets behind it). Nothing answers, so peers find out by their own
// timeouts. restore lifts the cut; it is safe to call once. The testbed's
// Close removes the rules regardless.
func (tb *Testbed) Isolate(s *Site) (restore func() error, err error) {
	h := tb.wan.nl
	var added []*netlink.Rule
	restore = func() error {
		var errs []error
		for _, r := range added {
			if err := h.RuleDel(r); err != nil {
				errs = append(errs, fmt.Errorf("isolate %s: delete rule %s: %w", s.name, r, err))
			}
		}
		added = nil
		return errors.Join(errs...)
	}
	rules := []*netlink.Rule{}
	in := netlink.NewRule()
	in.IifName, in.Priority, in.Type = "to-"+s.name, isolatePriority, nl.FR_ACT_BLACKHOLE
	rules = append(rules, in)
	for _, p := range append(s.Behind(), s.addr.Masked()) {
		out := netlink.NewRule()
		out.Dst = &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		out.Priority, out.Type = isolatePriority, nl.FR_ACT_BLACKHOLE
		rules = append(rules, out)
	}
	for _, r := range rules {
		if err := h.RuleAdd(r); err != nil {
			restore()
			return nil, fmt.Errorf("isolate %s: rule %s: %w", s.name, r, err)
		}
		added = append(added, r)
	}
	return restore, nil
}
