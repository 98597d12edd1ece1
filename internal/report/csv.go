package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spanperf/spanperf/internal/results"
)

// csvHeader names the columns CSV writes.
var csvHeader = []string{"run", "datapath", "workload", "params", "rep", "trial", "metric", "value", "unit", "error"}

// CSV writes the trials of runs as tidy CSV: a header, then one row per
// trial × metric (metrics in name order), with the run's label (see
// RunLabels), datapath, workload, params key, repetition, trial index,
// metric, value in the metric's base unit (shortest exact decimal form; NaN,
// +Inf, -Inf as such), the base unit (MetricUnit) and the trial's error.
// Paced trials also have results.CPUCoresOverBaseline, derived against
// opts.Baseline (else the first datapath; see withOverBaseline). A
// trial without metrics (a failed one) has one row with metric and value
// empty. Rows follow the runs' record order.
func CSV(w io.Writer, runs []Run, opts Options) error {
	if len(runs) == 0 {
		return fmt.Errorf("csv report: no runs")
	}
	labels := RunLabels(runs)
	var all []results.Record
	for _, run := range runs {
		all = append(all, run.Records...)
	}
	if base := opts.Baseline; base != "" || len(all) > 0 {
		if base == "" {
			base = displayOrder(all, nil)[0]
		}
		runs = runsWithOverBaseline(runs, base)
	}
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for i, run := range runs {
		for _, r := range run.Records {
			base := []string{labels[i], r.Datapath, r.Workload, r.Params.Key(), strconv.Itoa(r.Rep), strconv.Itoa(r.Trial)}
			if len(r.Metrics) == 0 {
				cw.Write(append(base, "", "", "", oneLine(r.Error)))
				continue
			}
			names := make([]string, 0, len(r.Metrics))
			for m := range r.Metrics {
				names = append(names, m)
			}
			sort.Strings(names)
			for _, m := range names {
				row := append(slices.Clone(base), m, strconv.FormatFloat(r.Metrics[m], 'g', -1, 64), MetricUnit(m), oneLine(r.Error))
				cw.Write(row)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv report: %w", err)
	}
	return nil
}

// MetricUnit is the base unit of a metric, from its name: "bit/s" for
// _bps, "1/s" for _per_s, "s" for _s, "B" for _bytes and bytes, "cores"
// for cpu_cores…, "J" for energy_joules, "J/GB" for joules_per_gigabyte,
// "s/GB" for cpu_seconds_per_gigabyte, "µs" for cpu_us_per_transaction;
// _per_core appends "/core". A component suffix ("{name}") is ignored.
// Other metrics (counts, flags) have no unit: "".
func MetricUnit(metric string) string {
	if i := strings.IndexByte(metric, '{'); i >= 0 {
		metric = metric[:i]
	}
	per := ""
	if m, ok := strings.CutSuffix(metric, "_per_core"); ok {
		metric, per = m, "/core"
	}
	u := ""
	switch {
	case metric == "joules_per_gigabyte":
		u = "J/GB"
	case metric == results.CPUSecondsPerGigabyte:
		u = "s/GB"
	case metric == results.CPUMicrosPerTransaction:
		u = "µs"
	case metric == "energy_joules":
		u = "J"
	case strings.HasPrefix(metric, "cpu_cores") || strings.HasPrefix(metric, "cgroup_cpu_cores") || metric == "cpu_limit_cores":
		u = "cores"
	case strings.HasSuffix(metric, "_bps"):
		u = "bit/s"
	case strings.HasSuffix(metric, "_per_s"):
		u = "1/s"
	case strings.HasSuffix(metric, "_s"):
		u = "s"
	case strings.HasSuffix(metric, "_bytes") || metric == "bytes" || strings.HasPrefix(metric, "rss_bytes"):
		u = "B"
	}
	if u == "" {
		return ""
	}
	return u + per
}
