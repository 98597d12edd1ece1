package scenario

import "fmt"

// CapabilityChecker is an optional Catalog capability: Validate asks it
// whether each datapath, with its options, has what each workload needs
// of a datapath beyond carrying traffic (discovery exposes a service
// after setup, failover routes to a service served in two sites).
type CapabilityChecker interface {
	// CheckCapability returns nil when datapath name with options opts can
	// run workload, else an error saying why not.
	CheckCapability(workload, name string, opts map[string]any) error
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
			if err := cc.CheckCapability(w.Type, d.Name, d.Options); err != nil {
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
			return cc.CheckCapability(workload, d.Name, d.Options)
		}
	}
	return nil
}
