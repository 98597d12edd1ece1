package plugins

import (
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
)

var _ scenario.CapabilityChecker = Catalog{}

// CheckCapability implements scenario.CapabilityChecker: when workload
// needs a datapath capability (workload.Info.Needs), it makes the
// datapath from its options, builds nothing, and asks, for the
// scenario's topology,
// datapath.CheckCapability.
func (Catalog) CheckCapability(workload, name string, opts map[string]any, topology string) error {
	w, ok := Workload(workload)
	if !ok || w.Needs == "" {
		return nil
	}
	dp, err := newDatapath(name, opts)
	if err != nil {
		return err
	}
	return datapath.CheckCapability(name, dp, w.Needs, topology)
}
