package scenario

import (
	"fmt"
	"slices"
	"strings"
)

// CapabilityChecker is an optional Catalog capability: Validate asks it
// whether each datapath, with its options, has what each workload needs
// of a datapath beyond carrying traffic (discovery exposes a service
// after setup, failover routes to a service served in two sites).
type CapabilityChecker interface {
	// CheckCapability returns nil when datapath name with options opts can
	// run workload in topology, else an error saying why not.
	CheckCapability(workload, name string, opts map[string]any, topology string) error
}

// capabilityProblems asks cat (a CapabilityChecker) whether the
// scenario's datapaths can run each workload. A workload that none of
// them can run is refused, with each datapath's reason, at its type key;
// one that some can run is planned for those only (the run says which it
// leaves out: Incapable).
func (s *Scenario) capabilityProblems(cat Catalog) []problem {
	cc, ok := cat.(CapabilityChecker)
	if !ok {
		return nil
	}
	var ps []problem
	for i, w := range s.Workloads {
		var why []problem
		for j, d := range s.Datapaths {
			if err := cc.CheckCapability(w.Type, d.Name, d.Options, s.Topology); err != nil {
				why = append(why, problem{subject: index("workloads", i) + ".type", msg: fmt.Sprintf("%s: datapaths[%d]: %v", w.Type, j, err)})
			}
		}
		if len(why) == len(s.Datapaths) {
			ps = append(ps, why...)
		}
	}
	return ps
}

// Incapable returns why the datapath labelled label cannot run workload
// (cat being a CapabilityChecker), or nil when it can: such pairs are left
// out of the plan.
func (s *Scenario) Incapable(cat Catalog, label, workload string) error {
	cc, ok := cat.(CapabilityChecker)
	if !ok {
		return nil
	}
	for _, d := range s.Datapaths {
		if d.Label == label {
			return cc.CheckCapability(workload, d.Name, d.Options, s.Topology)
		}
	}
	return nil
}

// ServersParam is the parameter of a workload whose server runs in two
// sites (failover): "b+c", the preferred first; "" means the last two
// sites.
const ServersParam = "servers"

// serversProblems checks workload w's ServersParam values (at key path
// path), when it has the parameter: two different sites of s, neither the
// client's at any point.
func (s *Scenario) serversProblems(path string, w WorkloadSpec) []problem {
	vals, ok := w.Params[ServersParam]
	if !ok {
		return nil
	}
	names := s.SiteNames()
	var ps []problem
	for j, v := range vals {
		ek := elemKey(join(path, ServersParam), j, len(vals))
		str, _ := v.(string)
		parts := strings.Split(str, "+")
		if str == "" {
			if len(names) < 3 {
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("the last two sites serve and the first is the client's: needs 3 sites, the scenario has %d", len(names))})
			}
			continue
		}
		if len(parts) != 2 || parts[0] == parts[1] {
			ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q: want two different sites, \"b+c\" (the preferred first)", str)})
			continue
		}
		for _, n := range parts {
			if !slices.Contains(names, n) {
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q is not a site (sites: %s)", n, strings.Join(names, ", "))})
			}
		}
	}
	if len(ps) > 0 || len(names) < 2 {
		return ps
	}
	for _, pt := range w.points() {
		c := names[0]
		if v, ok := pt.Params[ClientParam].(string); ok {
			c = v
		}
		sv, _ := pt.Params[ServersParam].(string)
		servers := strings.Split(sv, "+")
		if sv == "" {
			servers = names[len(names)-2:]
		}
		for _, cs := range strings.Split(c, "+") {
			if slices.Contains(servers, cs) {
				ps = append(ps, problem{subject: path, msg: fmt.Sprintf("point %q puts the client in %s, a server's site: they must be three sites", pt.Params.Key(), cs)})
			}
		}
	}
	return ps
}
