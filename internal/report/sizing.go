package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// RateParam is the workload parameter that offers a paced load (rr's rate).
const RateParam = "rate"

// IsCPULimitParam reports whether a parameter name is a CPU limit put on
// every point of a limits sweep: "limit.<component-or-role>.cpu", in cores.
func IsCPULimitParam(name string) bool {
	return strings.HasPrefix(name, "limit.") && strings.HasSuffix(name, ".cpu") && len(name) > len("limit..cpu")
}

// limitTarget is the component or role of a CPU limit parameter.
func limitTarget(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "limit."), ".cpu")
}

// SizingCells says what a sizing table's cells show.
type SizingCells string

// The cell contents a sizing table can show. The zero value is SizingP50P99.
const (
	// SizingP50P99 shows latency p50 / p99.
	SizingP50P99 SizingCells = "p50-p99"
	// SizingMeanMax shows latency average / maximum, as the Skupper sizing
	// guide's h2load tables do.
	SizingMeanMax SizingCells = "mean-max"
)

// ParseSizingCells returns the SizingCells a scenario or flag names: ""
// (SizingP50P99), "p50-p99" or "mean-max".
func ParseSizingCells(s string) (SizingCells, error) {
	switch SizingCells(s) {
	case "", SizingP50P99:
		return SizingP50P99, nil
	case SizingMeanMax:
		return SizingMeanMax, nil
	}
	return "", fmt.Errorf("sizing cells %q: want %s or %s", s, SizingP50P99, SizingMeanMax)
}

// SizingOptions controls Sizing. The zero value shows p50 / p99 and no
// baseline column.
type SizingOptions struct {
	// Baseline is the datapath whose records at the same workload,
	// parameters and offered rate (and no CPU limit) fill a last column of
	// every table of another datapath: the sizing guide's "No Skupper".
	// Empty, or a datapath with no such records, shows no such column.
	Baseline string
	// Cells is what each cell shows; "" means SizingP50P99.
	Cells SizingCells
}

// sizingRateMetrics are the achieved-rate metrics a sizing cell compares
// with the offered rate, the first a record has: HTTP's requests, then
// every other paced workload's transactions (rr, pgbench, and any
// workload that records its operations as transactions_per_s).
var sizingRateMetrics = []string{results.RequestsPerS, results.TransactionsPerS}

// Sizing writes a sizing table for each sweep in recs and reports whether it
// wrote any. A sweep is the records of one datapath, one workload and one
// point of its other parameters that have a RateParam above 0 and at least
// one CPU limit parameter (IsCPULimitParam); other records are ignored, and
// when no record qualifies nothing is written. Any paced workload
// qualifies: rr, http (HTTP/1.1 and HTTP/2), pgbench with rate, and any
// other whose records carry a rate parameter and an achieved rate
// (sizingRateMetrics).
//
// A table has a row per offered rate and a column per CPU limit (per
// combination of limits, when several components are limited), both in
// ascending order, in the order sweeps first appear in recs. A row is
// labelled with the median target_rate its records report (a workload
// whose rate is per connection reports the total), else with the rate
// parameter. When opts.Baseline names another datapath that has records
// at the same workload, other parameters and rate, a last column shows
// them, labelled "BASELINE (no limit)".
//
// A cell shows "p50 / p99" (or "avg / max", opts.Cells): the medians, over
// the cell's successful trials, of latency_p50_s and latency_p99_s (or
// latency_mean_s and latency_max_s), in the unit FormatValue picks. It
// shows "not sustained (ACHIEVED)" instead when the median achieved rate
// is below results.SustainedFraction of the offered rate, "failed" when
// every trial failed, and "–" when there was no trial. A cell some of
// whose trials failed carries a "*" and summarizes the others. Lines below
// the tables explain what is shown.
func Sizing(w io.Writer, recs []results.Record, opts SizingOptions) (printed bool, err error) {
	cells, err := ParseSizingCells(string(opts.Cells))
	if err != nil {
		return false, err
	}
	tables, err := SizingTables(recs, opts)
	if err != nil || len(tables) == 0 {
		return false, err
	}
	var buf bytes.Buffer
	anyFailed, anyUnsustained, anyBaseline := false, false, false
	for i, t := range tables {
		if i > 0 {
			buf.WriteByte('\n')
		}
		title := "sizing: " + t.Datapath + " " + t.Workload
		if t.Params != "" {
			title += " " + t.Params
		}
		buf.WriteString(title + "\n")
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		anyBaseline = anyBaseline || t.Baseline != ""
		writeRow(tw, append([]string{"offered rate"}, t.Columns...))
		for _, row := range t.Rows {
			line := []string{FormatValue(results.TransactionsPerS, float64(row.OfferedPerS))}
			for _, c := range row.Cells {
				anyFailed = anyFailed || c.Failed > 0 && c.Failed < c.Trials
				anyUnsustained = anyUnsustained || c.Sustained != nil && !*c.Sustained
				line = append(line, c.Text)
			}
			writeRow(tw, line)
		}
		tw.Flush() // writes to a bytes.Buffer, which cannot fail
	}
	if cells == SizingMeanMax {
		buf.WriteString("\ncells: latency average / maximum, each the median over repetitions, latency from the intended send time\n")
	} else {
		buf.WriteString("\ncells: latency p50 / p99, each the median over repetitions, latency from the intended send time\n")
	}
	buf.WriteString("columns: CPU limit in cores (CFS quota) of the component or role named\n")
	if anyBaseline {
		fmt.Fprintf(&buf, "%s (no limit): the baseline datapath at the same rates, no component limited (the sizing guide's \"No Skupper\")\n", opts.Baseline)
	}
	if anyUnsustained {
		fmt.Fprintf(&buf, "not sustained: the median achieved rate (in parentheses) was below %.0f%% of the offered rate\n", results.SustainedFraction*100)
	}
	if anyFailed {
		buf.WriteString("* some trials of the cell failed; it summarizes the others\n")
	}
	if _, err := w.Write(trimLines(buf.Bytes())); err != nil {
		return false, fmt.Errorf("write sizing table: %w", err)
	}
	return true, nil
}

// SizingTable is one table Sizing prints, as data (the JSON report's
// "sizing"): a paced workload point of one datapath, a row per offered
// rate, a column per CPU limit, and the baseline's column when there is
// one.
type SizingTable struct {
	// Run labels the run in a report of several; empty from SizingTables.
	Run      string `json:"run,omitempty"`
	Datapath string `json:"datapath"`
	Workload string `json:"workload"`
	// Params is the point's other parameters (params.Key()).
	Params string `json:"params"`
	// Columns label the cells of every row: "COMPONENT CORES[, ...]", and
	// last "BASELINE (no limit)" when Baseline is set.
	Columns  []string `json:"columns"`
	Baseline string   `json:"baseline,omitempty"`
	// Cells says what a cell's Low and High are: "p50-p99" or "mean-max".
	Cells string      `json:"cells"`
	Rows  []SizingRow `json:"rows"`
}

// SizingRow is one offered rate of a SizingTable.
type SizingRow struct {
	// OfferedPerS is the median target_rate of the row's records, else
	// the rate parameter.
	OfferedPerS Float        `json:"offered_per_s"`
	Cells       []SizingCell `json:"cells"`
}

// SizingCell is one cell of a SizingTable: the medians over its
// successful trials.
type SizingCell struct {
	// Text is what the printed table shows.
	Text string `json:"text"`
	// Trials and Failed count the cell's trials and the failed ones.
	Trials int `json:"trials"`
	Failed int `json:"failed,omitempty"`
	// AchievedPerS is the median achieved rate; Sustained says whether it
	// was at least results.SustainedFraction of the offered rate (nil
	// without one).
	AchievedPerS *Float `json:"achieved_per_s,omitempty"`
	Sustained    *bool  `json:"sustained,omitempty"`
	// LowS and HighS are the median latencies the cell shows, in seconds:
	// p50 and p99, or mean and max (SizingTable.Cells).
	LowS  *Float `json:"low_s,omitempty"`
	HighS *Float `json:"high_s,omitempty"`
}

// SizingTables returns the tables Sizing prints, as data, in its order
// (see Sizing for what qualifies and what a cell holds).
func SizingTables(recs []results.Record, opts SizingOptions) ([]SizingTable, error) {
	cells, err := ParseSizingCells(string(opts.Cells))
	if err != nil {
		return nil, err
	}
	base := baselineCells(recs, opts.Baseline)
	var out []SizingTable
	for _, sw := range buildSweeps(recs) {
		t := SizingTable{Datapath: sw.datapath, Workload: sw.workload, Params: sw.params, Cells: string(cells)}
		for _, c := range sw.columns {
			t.Columns = append(t.Columns, c.label)
		}
		baseKey := func(rate float64) string { return sw.workload + "|" + sw.params + "|" + results.FormatValue(rate) }
		if sw.datapath != opts.Baseline {
			for _, rate := range sw.rates {
				if len(base[baseKey(rate)]) > 0 {
					t.Baseline = opts.Baseline
				}
			}
		}
		if t.Baseline != "" {
			t.Columns = append(t.Columns, opts.Baseline+" (no limit)")
		}
		for _, rate := range sw.rates {
			var all []results.Record
			for _, c := range sw.columns {
				all = append(all, sw.cells[cellKey{rate, c.key}]...)
			}
			offered := offeredRate(rate, all)
			row := SizingRow{OfferedPerS: Float(offered)}
			for _, c := range sw.columns {
				row.Cells = append(row.Cells, sizingCell(offered, sw.cells[cellKey{rate, c.key}], cells))
			}
			if t.Baseline != "" {
				row.Cells = append(row.Cells, sizingCell(offered, base[baseKey(rate)], cells))
			}
			t.Rows = append(t.Rows, row)
		}
		out = append(out, t)
	}
	return out, nil
}

// baselineCells groups the paced records of the baseline datapath that
// carry no CPU limit by workload, other parameters and rate, keyed as
// Sizing looks them up.
func baselineCells(recs []results.Record, baseline string) map[string][]results.Record {
	out := map[string][]results.Record{}
	if baseline == "" {
		return out
	}
	for _, r := range recs {
		if r.Datapath != baseline {
			continue
		}
		rate, ok := numeric(r.Params[RateParam])
		if !ok || rate <= 0 {
			continue
		}
		other := results.Params{}
		limited := false
		for k, v := range r.Params {
			switch {
			case k == RateParam:
			case IsCPULimitParam(k):
				limited = true
			default:
				other[k] = v
			}
		}
		if limited {
			continue
		}
		k := r.Workload + "|" + other.Key() + "|" + results.FormatValue(rate)
		out[k] = append(out[k], r)
	}
	return out
}

// offeredRate is the median target_rate of recs, else rate.
func offeredRate(rate float64, recs []results.Record) float64 {
	var t []float64
	for _, r := range recs {
		if v, ok := r.Metrics[results.TargetRate]; ok && r.Error == "" {
			t = append(t, v)
		}
	}
	if s := stats.Summarize(t); s.N > 0 {
		return s.Median
	}
	return rate
}

// achievedRate is a record's achieved rate: its first sizingRateMetrics.
func achievedRate(r results.Record) (float64, bool) {
	for _, m := range sizingRateMetrics {
		if v, ok := r.Metrics[m]; ok {
			return v, true
		}
	}
	return 0, false
}

// sweep is one sizing table.
type sweep struct {
	datapath, workload, params string
	rates                      []float64
	columns                    []column
	cells                      map[cellKey][]results.Record
}

// column is one combination of CPU limits.
type column struct {
	key    string
	label  string
	values []float64 // in the order of the sweep's sorted limit names
}

type cellKey struct {
	rate   float64
	column string
}

func buildSweeps(recs []results.Record) []*sweep {
	var order []*sweep
	byKey := map[string]*sweep{}
	for _, r := range recs {
		rate, ok := numeric(r.Params[RateParam])
		if !ok || rate <= 0 {
			continue
		}
		other := results.Params{}
		var limits []string
		for k, v := range r.Params {
			switch {
			case k == RateParam:
			case IsCPULimitParam(k):
				if _, ok := numeric(v); ok {
					limits = append(limits, k)
				}
			default:
				other[k] = v
			}
		}
		if len(limits) == 0 {
			continue
		}
		slices.Sort(limits)
		params := other.Key()
		// Sweeps whose points limit different components are different
		// tables: their columns do not line up.
		key := r.Datapath + "|" + r.Workload + "|" + params + "|" + strings.Join(limits, ",")
		sw := byKey[key]
		if sw == nil {
			sw = &sweep{datapath: r.Datapath, workload: r.Workload, params: params, cells: map[cellKey][]results.Record{}}
			byKey[key] = sw
			order = append(order, sw)
		}
		col := column{}
		var keyParts, labelParts []string
		for _, k := range limits {
			v, _ := numeric(r.Params[k])
			col.values = append(col.values, v)
			keyParts = append(keyParts, results.FormatValue(v))
			labelParts = append(labelParts, limitTarget(k)+" "+results.FormatValue(v))
		}
		col.key, col.label = strings.Join(keyParts, ","), strings.Join(labelParts, ", ")
		if !slices.ContainsFunc(sw.columns, func(c column) bool { return c.key == col.key }) {
			sw.columns = append(sw.columns, col)
		}
		if !slices.Contains(sw.rates, rate) {
			sw.rates = append(sw.rates, rate)
		}
		ck := cellKey{rate, col.key}
		sw.cells[ck] = append(sw.cells[ck], r)
	}
	for _, sw := range order {
		slices.Sort(sw.rates)
		slices.SortFunc(sw.columns, func(a, b column) int { return slices.Compare(a.values, b.values) })
	}
	return order
}

// sizingCell summarizes one cell at offered rate.
func sizingCell(offered float64, recs []results.Record, cells SizingCells) SizingCell {
	c := SizingCell{Text: "–", Trials: len(recs)}
	if len(recs) == 0 {
		return c
	}
	lo, hi := results.LatencyP50, results.LatencyP99
	if cells == SizingMeanMax {
		lo, hi = results.LatencyMean, results.LatencyMax
	}
	var rate, a, b []float64
	for _, r := range recs {
		if r.Error != "" {
			c.Failed++
			continue
		}
		if v, ok := achievedRate(r); ok {
			rate = append(rate, v)
		}
		if v, ok := r.Metrics[lo]; ok {
			a = append(a, v)
		}
		if v, ok := r.Metrics[hi]; ok {
			b = append(b, v)
		}
	}
	if c.Failed == len(recs) {
		c.Text = "failed"
		return c
	}
	mark := ""
	if c.Failed > 0 {
		mark = "*"
	}
	achieved, sa, sb := stats.Summarize(rate), stats.Summarize(a), stats.Summarize(b)
	if achieved.N > 0 {
		v, ok := Float(achieved.Median), achieved.Median >= results.SustainedFraction*offered
		c.AchievedPerS, c.Sustained = &v, &ok
	}
	if sa.N > 0 && sb.N > 0 {
		l, h := Float(sa.Median), Float(sb.Median)
		c.LowS, c.HighS = &l, &h
	}
	switch {
	case c.Sustained != nil && !*c.Sustained:
		c.Text = "not sustained (" + FormatValue(results.TransactionsPerS, achieved.Median) + ")" + mark
	case c.LowS == nil || achieved.N == 0:
		c.Text = "–" + mark
	default:
		c.Text = FormatValue(lo, sa.Median) + " / " + FormatValue(hi, sb.Median) + mark
	}
	return c
}

// numeric returns a parameter value as a number: records built in memory
// hold int64 or float64, records decoded from JSON float64.
func numeric(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}
