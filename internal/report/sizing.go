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

// Sizing writes a sizing table for each sweep in recs and reports whether it
// wrote any. A sweep is the records of one datapath, one workload and one
// point of its other parameters that have a RateParam above 0 and at least
// one CPU limit parameter (IsCPULimitParam); other records are ignored, and
// when no record qualifies nothing is written.
//
// A table has a row per offered rate and a column per CPU limit (per
// combination of limits, when several components are limited), both in
// ascending order, in the order sweeps first appear in recs. A cell shows
// "p50 / p99": the medians, over the cell's successful trials, of
// latency_p50_s and latency_p99_s, in the unit FormatValue picks. It shows
// "not sustained (ACHIEVED)" instead when the median transactions_per_s is
// below results.SustainedFraction of the offered rate, "failed" when every
// trial failed, and "–" when there was no trial. A cell some of whose
// trials failed carries a "*" and summarizes the others. Lines below the
// tables explain what is shown.
func Sizing(w io.Writer, recs []results.Record) (printed bool, err error) {
	sweeps := buildSweeps(recs)
	if len(sweeps) == 0 {
		return false, nil
	}
	var buf bytes.Buffer
	anyFailed, anyUnsustained := false, false
	for i, sw := range sweeps {
		if i > 0 {
			buf.WriteByte('\n')
		}
		title := "sizing: " + sw.datapath + " " + sw.workload
		if sw.params != "" {
			title += " " + sw.params
		}
		buf.WriteString(title + "\n")
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		header := []string{"offered rate"}
		for _, c := range sw.columns {
			header = append(header, c.label)
		}
		writeRow(tw, header)
		for _, rate := range sw.rates {
			line := []string{FormatValue(results.TransactionsPerS, rate)}
			for _, c := range sw.columns {
				text, failed, unsustained := sizingCell(rate, sw.cells[cellKey{rate, c.key}])
				anyFailed = anyFailed || failed
				anyUnsustained = anyUnsustained || unsustained
				line = append(line, text)
			}
			writeRow(tw, line)
		}
		tw.Flush() // writes to a bytes.Buffer, which cannot fail
	}
	buf.WriteString("\ncells: latency p50 / p99, each the median over repetitions, latency from the intended send time\n")
	buf.WriteString("columns: CPU limit in cores (CFS quota) of the component or role named\n")
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

// sizingCell renders one cell and says whether some of its trials failed
// and whether it was not sustained.
func sizingCell(rate float64, recs []results.Record) (text string, failed, unsustained bool) {
	if len(recs) == 0 {
		return "–", false, false
	}
	var tps, p50, p99 []float64
	nfailed := 0
	for _, r := range recs {
		if r.Error != "" {
			nfailed++
			continue
		}
		if v, ok := r.Metrics[results.TransactionsPerS]; ok {
			tps = append(tps, v)
		}
		if v, ok := r.Metrics[results.LatencyP50]; ok {
			p50 = append(p50, v)
		}
		if v, ok := r.Metrics[results.LatencyP99]; ok {
			p99 = append(p99, v)
		}
	}
	if nfailed == len(recs) {
		return "failed", false, false
	}
	mark := ""
	if nfailed > 0 {
		mark, failed = "*", true
	}
	achieved := stats.Summarize(tps)
	if achieved.N > 0 && achieved.Median < results.SustainedFraction*rate {
		return "not sustained (" + FormatValue(results.TransactionsPerS, achieved.Median) + ")" + mark, failed, true
	}
	a, b := stats.Summarize(p50), stats.Summarize(p99)
	if a.N == 0 || b.N == 0 || achieved.N == 0 {
		return "–" + mark, failed, false
	}
	return FormatValue(results.LatencyP50, a.Median) + " / " + FormatValue(results.LatencyP99, b.Median) + mark, failed, false
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
