// Package plugins is the one place where datapaths and workloads are
// registered, in the order `spanperf list` shows them.
package plugins

import (
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/kubedp"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/workload"
)

// Datapaths returns every built-in datapath.
func Datapaths() []datapath.Info {
	return []datapath.Info{
		datapath.NativeInfo(),
		datapath.TunnelInfo("vxlan", "kernel VXLAN overlay between sites (UDP 4789)"),
		datapath.TunnelInfo("geneve", "kernel Geneve overlay between two sites (UDP 6081)"),
		datapath.TunnelInfo("gre", "kernel GRE tunnel between two sites"),
		datapath.TunnelInfo("ipip", "kernel IP-in-IP tunnel between two sites"),
		datapath.MacvlanInfo(),
		datapath.IPvlanInfo(),
		datapath.FlannelInfo(datapath.FlannelHostGW),
		datapath.FlannelInfo(datapath.FlannelVXLAN),
		datapath.WireGuardInfo(),
		datapath.IPsecInfo(),
		datapath.MTLSRelayInfo(),
		datapath.MeshGatewayInfo(),
		datapath.OVSInfo("geneve", "Open vSwitch Geneve overlay between two sites, its own ovsdb-server and ovs-vswitchd per site (userspace datapath, or the kernel's)"),
		datapath.OVSInfo("vxlan", "Open vSwitch VXLAN overlay between two sites, its own ovsdb-server and ovs-vswitchd per site (userspace datapath, or the kernel's)"),
		datapath.CustomInfo(),
		kubedp.PodInfo(),
		kubedp.HostNetInfo(),
		kubedp.ClusterIPInfo(),
		kubedp.NodePortInfo(),
		kubedp.LoadBalancerInfo(),
		kubedp.SkupperInfo(),
		kubedp.SubmarinerInfo(),
		kubedp.IstioInfo(),
		kubedp.CiliumInfo(),
		kubedp.LinkerdInfo(),
		kubedp.CustomInfo(),
	}
}

// Workloads returns every built-in workload.
func Workloads() []workload.Info {
	return []workload.Info{
		workload.StreamInfo(),
		workload.RRInfo(),
		workload.CRRInfo(),
		workload.HTTPInfo(),
		workload.RateSweepInfo(),
		workload.IPerf3Info(),
		workload.SockperfInfo(),
		workload.WrkInfo(),
		workload.H2loadInfo(),
		workload.PgbenchInfo(),
		workload.MessagingInfo(),
		workload.TunnelUpInfo(),
		workload.ConnectionsInfo(),
		workload.DiscoveryInfo(),
		workload.FailoverInfo(),
	}
}

// Catalog is the scenario.Catalog of the built-in plugins.
type Catalog struct{}

var (
	_ scenario.Catalog    = Catalog{}
	_ scenario.NameLister = Catalog{}
)

// Datapath looks up a datapath by name.
func Datapath(name string) (datapath.Info, bool) {
	for _, d := range Datapaths() {
		if d.Name == name {
			return d, true
		}
	}
	return datapath.Info{}, false
}

// Workload looks up a workload by name.
func Workload(name string) (workload.Info, bool) {
	for _, w := range Workloads() {
		if w.Name == name {
			return w, true
		}
	}
	return workload.Info{}, false
}

// DatapathFields implements scenario.Catalog.
func (Catalog) DatapathFields(name string) ([]scenario.Field, bool) {
	d, ok := Datapath(name)
	return d.Options, ok
}

// WorkloadFields implements scenario.Catalog.
func (Catalog) WorkloadFields(name string) ([]scenario.Field, bool) {
	w, ok := Workload(name)
	return w.Params, ok
}

// DatapathNames lists the registered datapaths (for "known: ..." in errors).
func (Catalog) DatapathNames() []string {
	var out []string
	for _, d := range Datapaths() {
		out = append(out, d.Name)
	}
	return out
}

// WorkloadNames lists the registered workloads.
func (Catalog) WorkloadNames() []string {
	var out []string
	for _, w := range Workloads() {
		out = append(out, w.Name)
	}
	return out
}
