package scenario

import (
	"errors"
	"time"
)

// fakeCatalog is a small catalog for tests: datapaths native, vxlan and
// geneve (which cannot run in the gateway topology; only native runs in
// hub and chain); workloads stream, rr,
// crr and tune (which has one field of every other kind).
type fakeCatalog struct{}

var (
	_ NameLister      = fakeCatalog{}
	_ TopologyChecker = fakeCatalog{}
	_ BackendLister   = fakeCatalog{}
)

// DatapathKube: k8s-pod is the fake catalog's exposure adapter.
func (fakeCatalog) DatapathKube(name string) bool { return name == "k8s-pod" }

// WorkloadPods: tune runs only on local sites.
func (fakeCatalog) WorkloadPods(name string) bool { return name != "tune" }

func (fakeCatalog) CheckTopology(name string, _ map[string]any, topology string) error {
	if name == "geneve" && topology == "gateway" {
		return errors.New("topology gateway: not supported by geneve")
	}
	if name != "native" && (topology == "hub" || topology == "chain") {
		return errors.New("topology " + topology + ": not supported by " + name + " (it supports mesh)")
	}
	return nil
}

func (fakeCatalog) DatapathFields(name string) ([]Field, bool) {
	switch name {
	case "native", "geneve", "k8s-pod":
		return nil, true
	case "vxlan":
		return []Field{
			{Name: "mtu", Kind: KindInt, Min: 576, HasMin: true, Default: 1450},
			{Name: "vni", Kind: KindInt, Default: 42},
		}, true
	}
	return nil, false
}

func (fakeCatalog) WorkloadFields(name string) ([]Field, bool) {
	switch name {
	case "stream":
		return []Field{
			{Name: "message_size", Kind: KindSize, List: true, Min: 1, HasMin: true, Default: 131072},
			{Name: "streams", Kind: KindInt, List: true, Min: 1, HasMin: true, Default: 1},
		}, true
	case "rr", "crr":
		return []Field{
			{Name: "request_size", Kind: KindSize, List: true, Default: 64},
			{Name: "response_size", Kind: KindSize, List: true, Default: 64},
			{Name: "concurrency", Kind: KindInt, List: true, Min: 1, HasMin: true, Default: 1},
		}, true
	case "tune":
		return []Field{
			{Name: "cc", Kind: KindString, Enum: []string{"bbr", "cubic"}, Default: "cubic", List: true},
			{Name: "pacing", Kind: KindBool, Default: false},
			{Name: "gain", Kind: KindFloat, Min: 0, HasMin: true, Default: 1},
			{Name: "interval", Kind: KindDuration, Default: 100 * time.Millisecond},
			{Name: "rate", Kind: KindRate, Default: "1gbit"},
			{Name: "target", Kind: KindString, Required: true},
		}, true
	}
	return nil, false
}

func (fakeCatalog) DatapathNames() []string { return []string{"native", "vxlan", "geneve", "k8s-pod"} }

func (fakeCatalog) WorkloadNames() []string { return []string{"stream", "rr", "crr", "tune"} }
