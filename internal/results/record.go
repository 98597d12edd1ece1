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
)

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
	// PID is the process ID, 0 for the kernel.
	PID int `json:"pid,omitempty"`
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
