package plugins

import (
	"fmt"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

var _ scenario.TopologyChecker = Catalog{}

// CheckTopology implements scenario.TopologyChecker: it makes the datapath
// from its options, builds nothing, and asks datapath.CheckTopology.
func (Catalog) CheckTopology(name string, opts map[string]any, topology string) error {
	dp, err := newDatapath(name, opts)
	if err != nil {
		return err
	}
	return datapath.CheckTopology(name, dp, topology)
}

// newDatapath makes datapath name from its options, building nothing.
func newDatapath(name string, opts map[string]any) (datapath.Datapath, error) {
	d, ok := Datapath(name)
	if !ok {
		return nil, fmt.Errorf("unknown datapath %q", name)
	}
	return d.New(opts)
}

var _ scenario.WANChecker = Catalog{}

// CheckWAN implements scenario.WANChecker: a datapath whose sites meet
// past the wan router (datapath.WANBypasser) cannot be shaped by it.
func (Catalog) CheckWAN(name string, opts map[string]any) error {
	dp, err := newDatapath(name, opts)
	if err != nil {
		return err
	}
	if b, ok := dp.(datapath.WANBypasser); ok {
		return fmt.Errorf("wan: %s", b.BypassesWAN())
	}
	return nil
}

var _ scenario.ComponentLister = Catalog{}

// Components implements scenario.ComponentLister with the datapath's
// declared components (datapath.Info.Components; the kernel when it
// declares none).
func (Catalog) Components(name string, opts map[string]any, sites int) []scenario.Component {
	d, ok := Datapath(name)
	if !ok {
		return nil
	}
	if d.Components == nil {
		k := datapath.KernelComponent()
		return []scenario.Component{{Name: k.Name, Role: k.Role}}
	}
	return d.Components(opts, sites)
}

var _ scenario.BackendLister = Catalog{}

// DatapathKube implements scenario.BackendLister: datapath.Info.Kube.
func (Catalog) DatapathKube(name string) bool {
	d, ok := Datapath(name)
	return ok && d.Kube
}

// WorkloadPods implements scenario.BackendLister: workload.Info.Pods.
func (Catalog) WorkloadPods(name string) bool {
	w, ok := Workload(name)
	return ok && w.Pods
}

var _ scenario.OptionsChecker = Catalog{}

// CheckOptions implements scenario.OptionsChecker with the datapath's
// datapath.Info.CheckOptions (nil when it has none).
func (Catalog) CheckOptions(name string, opts map[string]any) error {
	d, ok := Datapath(name)
	if !ok || d.CheckOptions == nil {
		return nil
	}
	return d.CheckOptions(opts)
}

var _ scenario.SiteChecker = Catalog{}

// CheckSites implements scenario.SiteChecker: it makes the datapath from
// its options, builds nothing, and asks datapath.CheckSites.
func (Catalog) CheckSites(name string, opts map[string]any, sites int) error {
	dp, err := newDatapath(name, opts)
	if err != nil {
		return err
	}
	return datapath.CheckSites(name, dp, sites)
}

var _ scenario.ParamsChecker = Catalog{}

// CheckParams implements scenario.ParamsChecker with the workload's
// workload.Info.CheckParams (nil when it has none).
func (Catalog) CheckParams(name string, params results.Params) error {
	w, ok := Workload(name)
	if !ok || w.CheckParams == nil {
		return nil
	}
	return w.CheckParams(params)
}
