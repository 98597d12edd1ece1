// Package scenario owns the scenario file: its schema, defaults (Normalize),
// validation with file and line numbers, command-line overrides, and the
// expansion of lists into a matrix of trials. It knows nothing of how
// anything runs: which datapaths and workloads exist, and what options they
// take, comes from a Catalog.
package scenario

import (
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// Kind is the type of a datapath option or workload parameter.
type Kind int

const (
	// KindInt is a whole number.
	KindInt Kind = iota
	// KindSize is a byte count: an integer or a string with a unit
	// (1024, "1KiB", "128k", "1MiB"; k/K/KB = 1000, KiB = 1024).
	KindSize
	// KindDuration is a Go duration string ("2s", "500ms").
	KindDuration
	// KindString is text, optionally restricted by Field.Enum.
	KindString
	// KindBool is true or false.
	KindBool
	// KindFloat is a number, whole or fractional.
	KindFloat
	// KindRate is a bit rate: an integer in bits/s or a string with a tc-style
	// unit ("100mbit", "1gbit", "500kbit"); stored as bits per second.
	KindRate
	// KindRecords is a list of mappings whose keys Field.Record describes
	// (each a scalar kind); stored as []map[string]any. Only datapath
	// options have it.
	KindRecords
)

// String names the kind as error messages do ("a size", ...).
func (k Kind) String() string {
	switch k {
	case KindInt:
		return "an integer"
	case KindSize:
		return "a size"
	case KindDuration:
		return "a duration"
	case KindString:
		return "a string"
	case KindBool:
		return "a boolean"
	case KindFloat:
		return "a number"
	case KindRate:
		return "a rate"
	case KindRecords:
		return "a list of mappings"
	}
	return "a value"
}

// Field describes one option of a datapath or one parameter of a workload.
//
// Decoded values are stored as: int64 (KindInt, KindSize, KindRate), float64
// (KindFloat), string (KindString), bool (KindBool), time.Duration
// (KindDuration), []map[string]any (KindRecords).
type Field struct {
	// Name is the key in the scenario file.
	Name string
	// Kind is the value's type.
	Kind Kind
	// Doc says what the field means, for `spanperf list` and errors.
	Doc string
	// Default is used when the file omits the field; nil means no default
	// (the field is then left out of the params unless Required).
	Default any
	// Required fields must be given.
	Required bool
	// Min, when HasMin, is the smallest accepted number (for numeric kinds).
	Min    float64
	HasMin bool
	// Enum, when not empty, lists the accepted strings.
	Enum []string
	// List fields accept a single value or a list; each list element becomes
	// its own point of the matrix. Datapath options are never lists.
	List bool
	// Record, for KindRecords, describes the keys of each mapping in the
	// list (their Kind a scalar one; Required, Enum and Min apply).
	Record []Field
}

// OptionsChecker is an optional Catalog capability: Validate asks it
// whether a datapath's options make sense together, beyond each value's
// kind. An error that is (or joins) FieldErrors is placed at their keys.
type OptionsChecker interface {
	// CheckOptions returns nil, or what is wrong with options opts
	// (defaults applied) of datapath name.
	CheckOptions(name string, opts map[string]any) error
}

// FieldError is a problem with one key below a datapath entry, for
// OptionsChecker: Key is a path like "components[1].selector".
type FieldError struct {
	// Key is the key path below the datapath entry.
	Key string
	// Msg says what is wrong.
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// Catalog tells the parser and Validate which datapaths and workloads exist
// and what each accepts.
type Catalog interface {
	// DatapathFields returns the options of datapath name, false if unknown.
	DatapathFields(name string) ([]Field, bool)
	// WorkloadFields returns the parameters of workload name, false if unknown.
	WorkloadFields(name string) ([]Field, bool)
}

// Topologies are the values of the top-level key topology; the first is
// the default. "direct" is the old name of "mesh": Normalize turns it into
// mesh, so records say mesh.
var Topologies = []string{"mesh", "hub", "chain", "gateway", "direct"}

// TopologyChecker is an optional Catalog capability: Validate asks it
// whether each datapath, with its options, can run in the scenario's
// topology.
type TopologyChecker interface {
	// CheckTopology returns nil when datapath name with options opts can
	// run in topology, else an error saying why not.
	CheckTopology(name string, opts map[string]any, topology string) error
}

// WANChecker is an optional Catalog capability: Validate asks it whether
// each datapath, with its options, passes through the wan router, when
// the scenario shapes the wan (rate, delay, jitter, loss or links).
type WANChecker interface {
	// CheckWAN returns nil when datapath name with options opts carries
	// its traffic through the shaped wan, else an error saying why not.
	CheckWAN(name string, opts map[string]any) error
}

// SiteChecker is an optional Catalog capability: Validate asks it whether
// each datapath, with its options, can join the scenario's number of sites.
type SiteChecker interface {
	// CheckSites returns nil when datapath name with options opts can
	// join sites sites, else an error saying why not.
	CheckSites(name string, opts map[string]any, sites int) error
}

// ComponentLister is an optional Catalog capability: it tells which
// components a datapath may have, before anything is built, so that
// Validate rejects a limit that names none of them and Normalize gives each
// limit only to the datapaths it names (Limit.Datapaths).
type ComponentLister interface {
	// Components returns every component datapath name with options opts
	// (defaults applied) may have on a testbed of sites sites.
	Components(name string, opts map[string]any, sites int) []Component
}

// Component is a component a datapath may have, as a ComponentLister
// declares it.
type Component struct {
	// Name is the component's name as records give it ("wireguard-go@a",
	// "kernel"); "" when only setup can tell, which any name with a site
	// ("NAME@SITE") may then match.
	Name string
	// Role is what it does on the path ("tunnel", "relay", "kernel", ...).
	Role string
	// Process is set for a process, which a limit can cap; kernel work has
	// no process.
	Process bool
}

// NameLister is an optional Catalog capability: error messages about an
// unknown datapath or workload list the known names when the catalog
// implements it.
type NameLister interface {
	// DatapathNames returns the names of every known datapath.
	DatapathNames() []string
	// WorkloadNames returns the names of every known workload.
	WorkloadNames() []string
}

// WAN describes the underlay between sites.
type WAN struct {
	// MTU of the underlay links; 0 means the default, 1500.
	MTU int `json:"mtu"`
	// MTUSweep holds wan.mtu given as a list: each value is a testbed of
	// its own and a point of the matrix (parameter results.WANMTUParam);
	// MTU is then the first.
	MTUSweep []int `json:"mtu_sweep,omitempty"`
	// RateBPS shapes each site's underlay link with tbf to this many bits/s
	// in each direction; 0 means unshaped. Written as `rate: 1gbit` in files.
	RateBPS int64 `json:"rate_bps"`
	// Delay is the one-way delay of every link between two sites; a list
	// sweeps it (each value is a point of the matrix, parameter
	// results.WANDelayParam). Empty means none.
	Delay []time.Duration `json:"delay,omitempty"`
	// Jitter spreads each packet's delay uniformly over delay±jitter; a
	// list sweeps it (results.WANJitterParam).
	Jitter []time.Duration `json:"jitter,omitempty"`
	// LossPercent drops this percentage of packets on every link; a list
	// sweeps it (results.WANLossParam). Written `loss: 1%` or `loss: 1`.
	LossPercent []float64 `json:"loss_percent,omitempty"`
	// Links override delay, jitter, loss and rate between two sites.
	Links []WANLink `json:"links,omitempty"`
	// Emulator is auto (the default: netem where the kernel has it and the
	// links are uniform, else userspace), netem or userspace.
	Emulator string `json:"emulator,omitempty"`
}

// WAN emulators.
const (
	WANEmulatorAuto      = "auto"
	WANEmulatorNetem     = "netem"
	WANEmulatorUserspace = "userspace"
)

// Emulated tells whether the WAN needs an emulator: delay, jitter, loss or
// per-pair links (a rate alone is tbf's).
func (w WAN) Emulated() bool {
	return len(w.Delay) > 0 || len(w.Jitter) > 0 || len(w.LossPercent) > 0 || len(w.Links) > 0
}

// WANLink is what one pair of sites' link does, in both directions,
// instead of the scenario-wide values. A zero field keeps the
// scenario-wide value (the trial's point of a sweep).
type WANLink struct {
	// Between names the two sites.
	Between [2]string `json:"between"`
	// Delay, Jitter, LossPercent and RateBPS as in WAN.
	Delay       time.Duration `json:"delay,omitempty"`
	Jitter      time.Duration `json:"jitter,omitempty"`
	LossPercent float64       `json:"loss_percent,omitempty"`
	RateBPS     int64         `json:"rate_bps,omitempty"`
	// DelaySweep, JitterSweep, LossSweep and RateSweep hold a value the
	// file gives as a list: each list sweeps the link's value, a point of
	// the matrix per element, as parameter results.WANLinkParam. A scalar
	// stays in the fields above and is no parameter.
	DelaySweep  []time.Duration `json:"delay_sweep,omitempty"`
	JitterSweep []time.Duration `json:"jitter_sweep,omitempty"`
	LossSweep   []float64       `json:"loss_percent_sweep,omitempty"`
	RateSweep   []int64         `json:"rate_bps_sweep,omitempty"`
}

// DefaultWattsPerCore is Energy.WattsPerCore when the file leaves it out.
const DefaultWattsPerCore = 10

// Energy is a linear model of a machine's power, used where RAPL cannot be
// read: joules = (IdleWatts + WattsPerCore × busy cores) × seconds, with
// busy cores machine-wide. The default attributes only the busy part.
type Energy struct {
	// IdleWatts is what the machine draws idle; default 0.
	IdleWatts float64 `json:"idle_watts"`
	// WattsPerCore is what one fully busy core adds (> 0); default
	// DefaultWattsPerCore.
	WattsPerCore float64 `json:"watts_per_core"`
}

// DatapathSpec is one entry of the datapaths list.
type DatapathSpec struct {
	// Name is the registered datapath name, e.g. "vxlan".
	Name string `json:"name"`
	// Label tells entries of the same datapath apart in records and reports;
	// it defaults to Name and must be unique within a scenario.
	Label string `json:"label"`
	// Options are the datapath's own options after defaults, by field name.
	Options map[string]any `json:"options,omitempty"`
}

// WorkloadSpec is one entry of the workloads list.
type WorkloadSpec struct {
	// Type is the registered workload name, e.g. "rr".
	Type string `json:"type"`
	// Params holds every parameter as a list of values (a scalar in the file
	// becomes a one-element list); the matrix is their cross product.
	Params map[string][]any `json:"params"`
}

// Scenario is a parsed scenario file.
type Scenario struct {
	// File is the path the scenario was read from, for messages.
	File string `json:"file,omitempty"`
	// Name names the scenario.
	Name string `json:"name"`
	// Sites is how many sites the testbed has; default 2.
	Sites int `json:"sites"`
	// SiteCounts, from `sites: [2, 4, 8]`, sweeps the number of local
	// sites: each is a point of the matrix (parameter SitesParam) with a
	// testbed of its own; Sites is then the largest.
	SiteCounts []int `json:"site_counts,omitempty"`
	// WAN is the underlay.
	WAN WAN `json:"wan"`
	// Topology is which sites the datapath joins directly and where
	// workloads run: "mesh" (default; "direct" is its old name), every pair
	// joined, workloads in the sites where the datapath ends its tunnels;
	// "hub", every other site joined to the first only, spoke-to-spoke
	// traffic crossing it; "chain", each site joined to the next in site
	// order; or "gateway", the mesh with workloads in a node behind each
	// site that routes cross-site traffic through the site (its gateway):
	// node → gateway → tunnel → gateway → node.
	Topology string `json:"topology"`
	// Baseline is the label of the datapath others are compared against;
	// default the first datapath.
	Baseline string `json:"baseline"`
	// Datapaths are compared against each other.
	Datapaths []DatapathSpec `json:"datapaths"`
	// Workloads run through every datapath.
	Workloads []WorkloadSpec `json:"workloads"`
	// Repetitions of each trial; default 3.
	Repetitions int `json:"repetitions"`
	// Duration of each trial's measured part; default 10s.
	Duration time.Duration `json:"duration"`
	// Warmup runs before each trial's measured part and is not counted;
	// default 1s.
	Warmup time.Duration `json:"warmup"`
	// Energy is the model that estimates a trial's energy from CPU time
	// where RAPL cannot be read (`energy: {idle_watts: X, watts_per_core: Y}`).
	Energy Energy `json:"energy"`
	// ProbeInterval is how often the probes sample CPU and memory during a
	// trial; default 200ms, at least 10ms.
	ProbeInterval time.Duration `json:"probe_interval"`
	// Seed orders the trials; 0 picks one at run time (recorded in the manifest).
	Seed int64 `json:"seed,omitempty"`
	// SiteList, when the file lists its sites, holds them: sites on
	// Kubernetes clusters, one kubeconfig context each (two may share
	// one). Sites is then its length. Empty: Sites local network
	// namespaces.
	SiteList []Site `json:"site_list,omitempty"`
	// Kube holds the settings of a run on Kubernetes sites.
	Kube Kube `json:"kubernetes,omitempty"`
	// Limits caps the resources of datapath components, by component name
	// (e.g. "wireguard-go@a") or role (e.g. "relay"): every component whose
	// name or role is the key gets the limit. Each list of values is a
	// dimension of the matrix (see Points).
	Limits map[string]Limit `json:"limits,omitempty"`
	// SizingCells is what the cells of the sizing tables show: "p50-p99"
	// (latency p50 / p99, the default when empty) or "mean-max" (average /
	// maximum, as the Skupper sizing guide's h2load tables).
	SizingCells string `json:"sizing_cells,omitempty"`
	// SummaryMetrics, when set, are the metrics the summary (and the
	// Markdown report) shows for every workload whose records carry
	// them, in this order, instead of each workload's headline metrics:
	// latency_p50_s, latency_p90_s, latency_p99_s, latency_p999_s for a
	// percentile table.
	SummaryMetrics []string `json:"summary_metrics,omitempty"`
}

// SizingCellsValues are the values sizing_cells accepts.
var SizingCellsValues = []string{"p50-p99", "mean-max"}

// Site is a site on a Kubernetes cluster, an entry of a sites list.
type Site struct {
	// Name is the site's name in records ([a-z0-9-], unique).
	Name string `json:"name"`
	// Context is the kubeconfig context; "" is the kubeconfig's current one.
	Context string `json:"context,omitempty"`
	// Kubeconfig is the kubeconfig file; "" uses the default loading
	// rules ($KUBECONFIG, else ~/.kube/config).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// NodeSelector places the site's agent pod on matching nodes.
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	// Tolerations let the site's agent pod run on tainted nodes.
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// Toleration is a pod toleration (Kubernetes' fields).
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// Probe values: how CPU is accounted on Kubernetes sites.
const (
	// ProbeNone: no node-level CPU; the figures that need it are missing,
	// with the reason.
	ProbeNone = "none"
	// ProbeNode: a privileged DaemonSet (host PID, read-only /proc and
	// /sys/fs/cgroup) runs the local probe on every node.
	ProbeNode = "node"
)

// Kube is what a run on Kubernetes sites needs beyond its sites.
type Kube struct {
	// Image is the agent image (see `spanperf image`); --image overrides.
	Image string `json:"image,omitempty"`
	// ServerImage is the image the servers that are not the agent's own
	// (http's server: nginx) run from, in a second container of each
	// agent pod; --server-image overrides. Any image that has the
	// program in its PATH does: it needs no shell.
	ServerImage string `json:"server_image,omitempty"`
	// Probe is ProbeNone (default) or ProbeNode.
	Probe string `json:"probe,omitempty"`
	// Prometheus is the URL of a Prometheus server whose
	// container_cpu_usage_seconds_total (cAdvisor's) gives the CPU of the
	// solution's pods, and Kepler's kepler_container_joules_total their
	// energy when it has it; "" queries none.
	Prometheus string `json:"prometheus,omitempty"`
	// AllowPatch lets limits patch the CPU limit of a solution's
	// Deployment or DaemonSet in the user's installation (restored after).
	AllowPatch bool `json:"allow_patch,omitempty"`
	// ShareNode lets two sites on one cluster run their agent pods on one
	// node (by default anti-affinity keeps client and server apart).
	ShareNode bool `json:"share_node,omitempty"`
}

// IsKube tells whether the scenario's sites are on Kubernetes clusters.
func (s *Scenario) IsKube() bool { return len(s.SiteList) > 0 }

// BackendLister is an optional Catalog capability: it tells which
// datapaths are Kubernetes exposure adapters, which run only on
// Kubernetes sites (the others only on local ones), and which workloads
// run in pods.
type BackendLister interface {
	// DatapathKube tells whether datapath name runs on Kubernetes sites.
	DatapathKube(name string) bool
	// WorkloadPods tells whether workload name runs in pods.
	WorkloadPods(name string) bool
}

// Limit is the resource limit of the components one key of
// Scenario.Limits names.
type Limit struct {
	// CPU lists CPU limits in cores (> 0), each enforced as a CFS quota of
	// that many CPUs; a file's single value is a one-element list. Every
	// value is its own point of the matrix, with the parameter
	// results.CPULimitParam(key).
	CPU []float64 `json:"cpu,omitempty"`
	// Workloads, from `workloads: [http, pgbench]`, are the workload types
	// the limit applies to; the scenario's other workloads run each point
	// once, unlimited (as a datapath without the component does). Empty
	// means every workload.
	Workloads []string `json:"workloads,omitempty"`
	// Datapaths are the labels of the datapaths with a component the key
	// names, in scenario order: only their points carry the limit, so a
	// baseline without that component runs beside a limits sweep once per
	// point. Normalize sets it when the catalog is a ComponentLister; nil
	// means every datapath.
	Datapaths []string `json:"datapaths,omitempty"`
}

// Point is one workload at one point of its matrix.
type Point struct {
	// Workload is the workload type.
	Workload string
	// Params maps every parameter of the workload to one value.
	Params results.Params
}

// Overrides are command-line settings that replace the file's.
type Overrides struct {
	// Duration replaces Scenario.Duration when non-zero.
	Duration time.Duration
	// Image replaces Kube.Image (the agent image) when not empty.
	Image string
	// ServerImage replaces Kube.ServerImage when not empty.
	ServerImage string
	// Reps replaces Scenario.Repetitions when non-zero.
	Reps int
	// Datapaths, when not empty, keeps only these datapath labels (an entry
	// not in the file is added by name with default options).
	Datapaths []string
	// Workloads, when not empty, keeps only these workload types (a type not
	// in the file is added with default parameters).
	Workloads []string
}
