// Package results defines the one record type that flows from run to report,
// and the run directory that holds a run's records on disk.
package results

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Metric names shared by workloads, probes and reports. Values are in base
// units: bytes, seconds, bits per second, counts.
const (
	ThroughputBPS     = "throughput_bps"
	TransactionsPerS  = "transactions_per_s"
	ConnectionsPerS   = "connections_per_s"
	LatencyP50        = "latency_p50_s"
	LatencyP90        = "latency_p90_s"
	LatencyP99        = "latency_p99_s"
	LatencyP999       = "latency_p999_s"
	LatencyMax        = "latency_max_s"
	LatencyMean       = "latency_mean_s"
	Retransmits       = "retransmits"
	CPUCoresGenerator = "cpu_cores_generator"
	// RetransmitRate is the stream's retransmitted data segments over the
	// data segments it sent (tcpi_total_retrans / tcpi_data_segs_out).
	RetransmitRate = "retransmit_rate"
	// SendBufferBytes is the largest send buffer of a stream's
	// connections at the end of its window (SO_SNDBUF as autotuned), and
	// TCPRmemMaxBytes the most a receive buffer autotunes to in the
	// client's site (net.ipv4.tcp_rmem's maximum): the buffers a
	// long-delay stream had.
	SendBufferBytes = "send_buffer_bytes"
	TCPRmemMaxBytes = "tcp_rmem_max_bytes"
)

// Latency sample rule and late requests (issue 10).
const (
	// LatencyP9999 is the 99.99th latency percentile in seconds.
	LatencyP9999 = "latency_p9999_s"
	// LatencySamples is the number of latencies the percentiles were taken
	// from (a paced run's late requests included); see TailMinSamples.
	LatencySamples = "latency_samples"
	// Late counts the requests of a paced run that were due before the
	// measured window ended but not sent by then. Each is in the latency
	// histogram with the time it had waited at the window's end, a lower
	// bound of its latency; none is in the achieved rate.
	Late = "late"
)

// CPU, memory and energy metrics (internal/probe and the runner). "Cores"
// are CPU-seconds per second of the measured window: 1 is one CPU busy all
// the time. Per-component metrics are named with For, e.g.
// "cpu_cores{wireguard-go@a}".
const (
	// CPUCores is a component's process tree's user+system CPU, averaged
	// over the window (per component).
	CPUCores = "cpu_cores"
	// CPUCoresPeak is the highest CPU of a component's process tree over one
	// sampling interval (per component).
	CPUCoresPeak = "cpu_cores_peak"
	// RSSBytesMax and RSSBytesAvg are the largest and the mean resident set
	// of a component's process tree over the samples (per component; pages
	// shared between processes of the tree count once per process).
	RSSBytesMax = "rss_bytes_max"
	RSSBytesAvg = "rss_bytes_avg"
	// CPUCoresDatapath is the CPU of every datapath process together (each
	// process counted once), without the kernel's softirq work.
	CPUCoresDatapath = "cpu_cores_datapath"
	// CPUCoresUser, CPUCoresSystem, CPUCoresIRQ, CPUCoresSoftirq and
	// CPUCoresBusy are machine-wide, from /proc/stat: every process and every
	// interrupt on the machine, not only the trial's. User includes nice;
	// busy is user+system+irq+softirq. Per CPU, each is also recorded as
	// For(CPUCoresSoftirq, "cpu0"), ...
	CPUCoresUser    = "cpu_cores_user"
	CPUCoresSystem  = "cpu_cores_system"
	CPUCoresIRQ     = "cpu_cores_irq"
	CPUCoresSoftirq = "cpu_cores_softirq"
	CPUCoresBusy    = "cpu_cores_busy"
	// ProbeWindow is the time the probe measured over, in seconds.
	ProbeWindow = "probe_window_s"
	// EnergyJoules is the machine's energy over the window: RAPL (every
	// package and its DRAM) when the machine has it and it counts, else the
	// estimate of the scenario's energy model (see probe.EnergyModel).
	EnergyJoules = "energy_joules"
	// EnergyEstimated is 1 when EnergyJoules is an estimate from CPU time,
	// 0 when it was read from RAPL.
	EnergyEstimated = "energy_estimated"
	// EnergyRAPL is the key in Record.Missing that says why RAPL was not read.
	EnergyRAPL = "energy_rapl"
	// CPUSecondsClient and CPUSecondsServer are the CPU seconds (user+system)
	// of the load generator's client and server agents over the window.
	CPUSecondsClient = "cpu_seconds_client"
	CPUSecondsServer = "cpu_seconds_server"
	// ThroughputBPSPerCore, TransactionsPerSPerCore and
	// ConnectionsPerSPerCore divide the workload's rate by the whole path's
	// cores, CPUCoresPath.
	ThroughputBPSPerCore    = "throughput_bps_per_core"
	TransactionsPerSPerCore = "transactions_per_s_per_core"
	ConnectionsPerSPerCore  = "connections_per_s_per_core"
	// JoulesPerGigabyte is EnergyJoules per 10⁹ bytes the workload moved.
	JoulesPerGigabyte = "joules_per_gigabyte"
	// Bytes is the number of bytes a stream workload moved in the window.
	Bytes = "bytes"
	// DurationS is the measured window of the workload's client, in seconds.
	DurationS = "duration_s"
)

// Whole-path CPU cost (issue 10): what moving the traffic cost the machine,
// generator included, on one basis for every datapath.
const (
	// CPUCoresForeign is busy CPU over the window that was spent neither by
	// the run's own processes nor by the kernel on their behalf (as well as
	// the probe can tell): another job's load on the machine.
	CPUCoresForeign = "cpu_cores_foreign"
	// CPUCoresPath is the machine's busy CPU over the window less
	// CPUCoresForeign: generator, datapath processes and kernel work alike.
	CPUCoresPath = "cpu_cores_path"
	// CPUSecondsPerGigabyte is CPUCoresPath × window seconds per 10⁹ bytes
	// moved (stream).
	CPUSecondsPerGigabyte = "cpu_seconds_per_gigabyte"
	// CPUMicrosPerTransaction is CPUCoresPath per transaction per second, in
	// microseconds (rr, crr, http).
	CPUMicrosPerTransaction = "cpu_us_per_transaction"
	// CPUCoresOverBaseline is a paced trial's CPUCoresPath less the median
	// CPUCoresPath of the baseline datapath at the same parameters (and so
	// the same offered rate). It is derived across trials by the summary and
	// report, never stored in a record.
	CPUCoresOverBaseline = "cpu_cores_over_baseline"
)

// ForeignCPUWarnCores is the foreign CPU above which a trial carries a
// warning: its figures shared the machine with another job.
const ForeignCPUWarnCores = 0.1

// Outcome and rate names that several workloads record (the http client,
// the wrk, h2load and pgbench drivers) and that compare gives a direction.
const (
	// RequestsPerS is an HTTP workload's achieved rate: requests completed
	// with a full, successful response per second of the measured window.
	RequestsPerS = "requests_per_s"
	// Errors counts measured requests or transactions that failed other
	// than by timeout.
	Errors = "errors"
	// Timeouts counts measured requests that hit their timeout.
	Timeouts = "timeouts"
	// OfferedPerS is the rate a paced run actually offered in its window
	// where that differs from TargetRate (pgbench's Poisson schedule): an
	// input, like TargetRate.
	OfferedPerS = "offered_per_s"
)

// For names metric for one component (or CPU): "metric{name}".
func For(metric, name string) string { return metric + "{" + name + "}" }

// Open-loop (paced) rr metrics: the client sends on a fixed schedule and
// measures latency from each request's intended send time.
const (
	// TargetRate is the offered rate in transactions per second.
	TargetRate = "target_rate"
	// Sustained is 1 when the achieved TransactionsPerS is at least
	// SustainedFraction × TargetRate, else 0.
	Sustained = "sustained"
	// SendLagP50 and SendLagP99 are percentiles of how late a paced request
	// left after its intended send time, over requests whose connection was
	// idle and waiting for that time: the generator's own pacing error, in
	// seconds. Requests sent late because their connection was still busy
	// are not in them (their wait is latency, not pacing error).
	SendLagP50 = "send_lag_p50_s"
	SendLagP99 = "send_lag_p99_s"
)

// SustainedFraction is the share of the offered rate a paced run must achieve
// to count as sustained (as Skupper's sizing guide marks cells).
const SustainedFraction = 0.95

// Cgroup metrics (the runner puts each datapath process in a cgroup of its
// own; see internal/cgroup). Both are per component, named with For.
const (
	// CgroupCPUCores is the CPU charged to a component's cgroup over the
	// measured window, in cores.
	CgroupCPUCores = "cgroup_cpu_cores"
	// CPULimitCores is the CPU limit (CFS quota) a component ran under, in
	// cores; absent for a component without a limit.
	CPULimitCores = "cpu_limit_cores"
)

// CPULimitParam names the parameter that carries the CPU limit of the
// scenario's limits key key (a component name or role) in Record.Params:
// "limit.KEY.cpu", its value the limit in cores (float64).
func CPULimitParam(key string) string { return "limit." + key + ".cpu" }

// JainFairness is Jain's fairness index of the clients' rates in a fan-in
// trial: (Σx)² / (n·Σx²), 1 when every client gets the same, 1/n when one
// gets everything.
const JainFairness = "jain_fairness"

// Metrics of tunnel-up, in seconds: how long the datapath's setup took
// (until it returned), how long from its start until the first transaction
// through it succeeded, and how long its teardown took; and how many
// connection attempts the probe started.
const (
	SetupSeconds    = "setup_s"
	TunnelUpSeconds = "tunnel_up_s"
	TeardownSeconds = "teardown_s"
	ProbeAttempts   = "probe_attempts"
)

// Parameters of the WAN a trial ran over, present when the scenario's wan
// sets them: one-way delay and jitter (duration strings) and loss (percent).
const (
	WANDelayParam  = "wan.delay"
	WANJitterParam = "wan.jitter"
	WANLossParam   = "wan.loss_percent"
)

// ParseCPULimitParam returns the limits key of a parameter named by
// CPULimitParam, and whether name is one.
func ParseCPULimitParam(name string) (key string, ok bool) {
	rest, ok := strings.CutPrefix(name, "limit.")
	if !ok {
		return "", false
	}
	key, ok = strings.CutSuffix(rest, ".cpu")
	return key, ok && key != ""
}

// Params is one point of the expanded matrix: parameter name to value
// (int64, float64, string, bool; durations as strings).
type Params map[string]any

// Key is a canonical text form of p, equal for equal parameters whether they
// were built in memory or decoded from JSON (where every number is float64).
func (p Params) Key() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(FormatValue(p[k]))
	}
	return b.String()
}

// FormatValue renders a parameter value the way Key does.
func FormatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return x.String()
	case nil:
		return ""
	default:
		return strings.TrimSpace(strings.ReplaceAll(fmt.Sprint(x), "\n", " "))
	}
}

// Series is a per-interval time series of one metric within a trial.
type Series struct {
	// Interval is the width of each bucket in seconds.
	Interval float64 `json:"interval_s"`
	// Values holds one value per interval, measured after warmup, in the
	// metric's base unit.
	Values []float64 `json:"values"`
}

// Component names a process (or the kernel) that carried traffic in a trial.
type Component struct {
	// Name identifies the component within the trial, e.g. "wireguard-go@a".
	Name string `json:"name"`
	// Role is what the component does on the path: tunnel, relay, proxy,
	// gateway, switch, kernel, generator.
	Role string `json:"role"`
	// Site is the site the component runs in.
	Site string `json:"site"`
	// PID is the process ID, 0 for the kernel and for a pod.
	PID int `json:"pid,omitempty"`
	// Context, Namespace, Pod and Container name a component that is a
	// pod's container on a Kubernetes cluster (Container empty: the whole
	// pod); Node is the node it ran on and PodUID the pod's UID, by which
	// the node probe finds its processes.
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	Node      string `json:"node,omitempty"`
	PodUID    string `json:"pod_uid,omitempty"`
	// Gateway is set when the component runs on a site's gateway, in front
	// of the node where the workload runs (topology gateway); for the kernel,
	// when the datapath's kernel work happens in the gateways.
	Gateway bool `json:"gateway,omitempty"`
}

// Record is the result of one trial: one datapath, one workload at one matrix
// point, one repetition.
type Record struct {
	// Run is the ID of the run that produced the record.
	Run string `json:"run"`
	// Trial is the trial's index in the run's plan (0-based).
	Trial int `json:"trial"`
	// Datapath is the datapath's label (its name unless the scenario gave a label).
	Datapath string `json:"datapath"`
	// Workload is the workload type, e.g. "stream".
	Workload string `json:"workload"`
	// Params is the expanded matrix point.
	Params Params `json:"params"`
	// Rep is the repetition number, from 0.
	Rep int `json:"rep"`
	// Start and End bound the trial, warmup included.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// WindowStart and WindowEnd are when the probe took its first and last
	// samples: the measured window (the workload's, see Env.Measure) over
	// which the CPU, cgroup CPU and energy figures were taken; ProbeWindow
	// is its length. Zero when the trial was not probed.
	WindowStart time.Time `json:"window_start,omitzero"`
	WindowEnd   time.Time `json:"window_end,omitzero"`
	// Metrics maps metric names to values in base units.
	Metrics map[string]float64 `json:"metrics"`
	// Series holds per-second series by metric name.
	Series map[string]Series `json:"series,omitempty"`
	// Histogram is the latency histogram (HdrHistogram V2 compressed, base64,
	// values in nanoseconds) when the workload measured latency.
	Histogram string `json:"histogram,omitempty"`
	// Components are the processes that carried traffic.
	Components []Component `json:"components,omitempty"`
	// Missing lists metrics a probe could not measure, with the reason.
	Missing map[string]string `json:"missing,omitempty"`
	// Warnings are conditions that make the trial's figures less reliable
	// without failing it (e.g. foreign CPU load), one sentence each; the
	// summary, report and compare show them.
	Warnings []string `json:"warnings,omitempty"`
	// Error is empty when the trial succeeded.
	Error string `json:"error"`
}

// TrialKey identifies a trial independent of when it ran.
func (r *Record) TrialKey() string {
	return TrialKey(r.Datapath, r.Workload, r.Params, r.Rep)
}

// TrialKey identifies a trial by datapath label, workload, params and repetition.
func TrialKey(datapath, workload string, p Params, rep int) string {
	return datapath + "|" + workload + "|" + p.Key() + "|" + strconv.Itoa(rep)
}

// GroupKey identifies the cell a trial belongs to, across repetitions.
func (r *Record) GroupKey() string {
	return r.Datapath + "|" + r.Workload + "|" + r.Params.Key()
}
