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

// capabilityProblems pairs every workload with every datapath and asks
// cat (a CapabilityChecker) whether the datapath can run it. A problem
// names the workload's type key and the datapath.
func (s *Scenario) capabilityProblems(cat Catalog) []problem {
	cc, ok := cat.(CapabilityChecker)
	if !ok {
		return nil
	}
	var ps []problem
	for i, w := range s.Workloads {
		for j, d := range s.Datapaths {
			if err := cc.CheckCapability(w.Type, d.Name, d.Options); err != nil {
				ps = append(ps, problem{subject: index("workloads", i) + ".type", msg: fmt.Sprintf("%s: datapaths[%d]: %v", w.Type, j, err)})
			}
		}
	}
	return ps
}
