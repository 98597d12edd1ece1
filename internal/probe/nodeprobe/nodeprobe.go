// Package nodeprobe is the local probe (package probe) on a Kubernetes
// node: `spanperf agent nodeprobe`, run in the node probe's DaemonSet pod
// (host PID namespace, the host's /proc), finds each component pod's
// processes by their cgroup, measures them and the node's CPU over a
// window, and prints one JSON Result. The controller merges the nodes'
// Results into a trial's metrics (Merge).
//
// The spec, on stdin or in --spec:
//
//	{"components": [{"name": "router@east", "pod_uid": "0b6c…", "container": "router",
//	                 "container_id": "containerd://9f3e…"}],
//	 "run_pods": ["0b6c…", "41aa…"], "node": "east-1",
//	 "delay": "2s", "window": "10s", "interval": "200ms",
//	 "energy": {"idle_watts": 0, "watts_per_core": 0}}
//
// A component without a container is the whole pod (every process in its
// cgroup, the pause process included). The processes of run_pods, of
// the components' pods, of the probe's own pod and the probe itself are
// the run's own; the rest of the node's user-space CPU is foreign
// (results.CPUCoresForeign).
//
// The result, one JSON object on stdout:
//
//	{"node": "east-1", "hostname": "spanperf-node-probe-x7k2p", "boot_id": "a250…",
//	 "start": "…", "end": "…",
//	 "metrics": {"probe_window_s": 10, "cpu_cores{router@east}": 0.42, "cpu_cores_peak{router@east}": 0.6,
//	             "rss_bytes_max{router@east}": 5.2e7, "rss_bytes_avg{router@east}": 5.1e7, "cpu_cores_datapath": 0.42,
//	             "cpu_cores_busy": 1.3, "cpu_cores_softirq": 0.2, "cpu_cores_busy{cpu0}": 0.7, …,
//	             "cpu_cores_foreign": 0.05, "cpu_cores_path": 1.25, "energy_joules": 160, "energy_estimated": 1},
//	 "missing": {"energy_rapl": "no RAPL: estimated from CPU time"},
//	 "foreign": [{"pid": 812, "ppid": 1, "comm": "etcd", "cores": 0.04}],
//	 "error": ""}
//
// On the controller: Plan makes each node's Spec from the run's pods and
// the trial's pod components, Collect runs them by exec in the node probe
// pods (kube.NodeProbeDaemonSet) over the trial's window, and Merge folds
// the nodes' Results into the trial's figures.
package nodeprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
)

// NodeNameEnv is the environment variable that names the node the probe
// runs on (the DaemonSet sets it from spec.nodeName).
const NodeNameEnv = "NODE_NAME"

// Component is one pod, or one container of a pod, to measure.
type Component struct {
	// Name names its metrics (results.For(results.CPUCores, Name), ...).
	Name string `json:"name"`
	// PodUID is the pod's UID (metadata.uid).
	PodUID string `json:"pod_uid"`
	// Container, when set, narrows the component to that container, found
	// by ContainerID (the pod status's containerID, scheme and all, or
	// bare).
	Container   string `json:"container,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
}

// Spec is what one node probe measures.
type Spec struct {
	// Components are the pods and containers on this node to measure.
	Components []Component `json:"components,omitempty"`
	// RunPods are the UIDs of every pod of the run (on any node): their
	// processes are the run's own, not foreign.
	RunPods []string `json:"run_pods,omitempty"`
	// Node is the node's name when NodeNameEnv is unset.
	Node string `json:"node,omitempty"`
	// Delay is the time from the start to the first sample; Window the
	// time sampled after it (0: until stopped: stdin closed, SIGTERM);
	// Interval the time between samples (0: probe.DefaultInterval).
	Delay    Duration `json:"delay,omitzero"`
	Window   Duration `json:"window,omitzero"`
	Interval Duration `json:"interval,omitzero"`
	// Energy is the model that estimates energy from CPU time where RAPL
	// cannot be read.
	Energy probe.EnergyModel `json:"energy,omitzero"`
}

// Validate reports a component without a name or pod, two with one name,
// a container without its ID, or a negative duration.
func (s Spec) Validate() error {
	names := map[string]bool{}
	for i, c := range s.Components {
		switch {
		case c.Name == "":
			return fmt.Errorf("nodeprobe: component %d: no name", i)
		case names[c.Name]:
			return fmt.Errorf("nodeprobe: component %q named twice", c.Name)
		case c.PodUID == "":
			return fmt.Errorf("nodeprobe: component %q: no pod_uid", c.Name)
		case c.Container != "" && c.ContainerID == "":
			return fmt.Errorf("nodeprobe: component %q: container %q without its container_id (from the pod's status)", c.Name, c.Container)
		}
		names[c.Name] = true
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"delay", s.Delay}, {"window", s.Window}, {"interval", s.Interval}} {
		if d.v < 0 {
			return fmt.Errorf("nodeprobe: %s must be ≥ 0, got %v", d.name, time.Duration(d.v))
		}
	}
	return nil
}

// Result is what one node probe prints.
type Result struct {
	// Node is the node's name (NodeNameEnv, else Spec.Node, else the
	// host name); Hostname is the probe's host name (the pod's, in a pod
	// without host network).
	Node     string `json:"node"`
	Hostname string `json:"hostname,omitempty"`
	// Context is the kubeconfig context of the node's cluster: set by
	// the controller (Collect), not by the probe.
	Context string `json:"context,omitempty"`
	// BootID is the kernel's boot ID: nodes that share it share one
	// kernel (one machine), whose CPU Merge counts once.
	BootID string `json:"boot_id,omitempty"`
	// Start and End are the first and last samples.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Metrics, Missing and Foreign are the probe's (probe.Result): the
	// components' figures named with their names, the node's machine-wide
	// CPU and energy unqualified.
	Metrics map[string]float64 `json:"metrics"`
	Missing map[string]string  `json:"missing,omitempty"`
	Foreign []probe.ProcessCPU `json:"foreign,omitempty"`
	// Error is set when the probe could not run at all.
	Error string `json:"error,omitempty"`
}

// Run measures spec on this node, reading processes under proc ("":
// /proc, the host's in a pod with host PID), until the window ends or
// ctx is done (then it returns what was measured).
func Run(ctx context.Context, spec Spec, proc string) (*Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if proc == "" {
		proc = "/proc"
	}
	comps := make([]results.Component, len(spec.Components))
	for i, c := range spec.Components {
		comps[i] = results.Component{Name: c.Name, Role: "pod", PodUID: strings.ToLower(c.PodUID), Container: c.Container, Node: spec.Node}
	}
	res := identify(spec, proc)
	p, err := probe.Start(ctx, probe.Spec{
		Interval:   time.Duration(spec.Interval),
		Components: comps,
		Delay:      time.Duration(spec.Delay),
		Window:     time.Duration(spec.Window),
		Energy:     spec.Energy,
		Proc:       proc,
		Finder:     newCgroupFinder(proc, spec),
	})
	if err != nil {
		return nil, fmt.Errorf("nodeprobe: %w", err)
	}
	<-p.Done() // the window's end, or ctx's
	r := p.Stop()
	res.Metrics, res.Missing, res.Foreign, res.Start, res.End = r.Metrics, r.Missing, r.Foreign, r.Start, r.End
	return res, nil
}

// identify returns a Result naming this node.
func identify(spec Spec, proc string) *Result {
	res := &Result{Node: os.Getenv(NodeNameEnv)}
	res.Hostname, _ = os.Hostname()
	if res.Node == "" {
		res.Node = spec.Node
	}
	if res.Node == "" {
		res.Node = res.Hostname
	}
	if b, err := os.ReadFile(filepath.Join(proc, "sys", "kernel", "random", "boot_id")); err == nil {
		res.BootID = strings.TrimSpace(string(b))
	}
	return res
}

// Duration is a time.Duration that JSON spells as Go does ("1.5s"); a
// number is nanoseconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return errors.New("duration: want a string like \"1.5s\"")
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
