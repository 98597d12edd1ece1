// Package report renders the records of a run for people: a plain-text
// summary table with medians, confidence intervals and changes against a
// baseline. It knows nothing of how the data was made.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// SummaryOptions controls Summary. The zero value compares every datapath
// against the first one seen.
type SummaryOptions struct {
	// Baseline is the datapath label the others are compared against.
	// Empty means the first datapath in display order. It must be a label
	// that appears in the records or in Datapaths.
	Baseline string
	// Datapaths is the display order of datapath labels. Labels listed here
	// that have no records show as rows of "–"; labels in the records but
	// not listed follow, in order of first appearance. Empty means order of
	// first appearance.
	Datapaths []string
	// Metrics, when set, are the metrics shown for every workload whose
	// records carry some of them (those, in this order), instead of its
	// headline metrics (scenario key summary_metrics).
	Metrics []string
}

// fallbackMetrics are the headline candidates for a workload without a fixed
// list, in display order.
var fallbackMetrics = []string{
	results.ThroughputBPS, results.TransactionsPerS, results.ConnectionsPerS,
	results.RequestsPerS, results.LatencyP50, results.LatencyP99,
}

// headlineMetrics are the metrics shown for the built-in workloads.
var headlineMetrics = map[string][]string{
	"stream": {results.ThroughputBPS},
	"rr":     {results.TransactionsPerS, results.LatencyP50, results.LatencyP99},
	"crr":    {results.ConnectionsPerS, results.LatencyP50, results.LatencyP99},
	// The rate found, and the latency at it.
	"rate-sweep": {"max_sustained_requests_per_s", results.LatencyP99},
	// A datapath's life: setup, first transaction, teardown.
	"tunnel-up": {results.SetupSeconds, results.TunnelUpSeconds, results.TeardownSeconds},
	// Memory per open connection: the level reached, and what it cost.
	"connections": {results.OpenConnections, results.ConnectRatePerS, results.ConnectFailures, results.RSSBytesDatapath, results.RSSBytesAddedPerConnectionDatapath},
	// A service appearing: until its first transaction, and the route's
	// part of it.
	"discovery": {results.DiscoverySeconds, results.RouteInstalledSeconds},
	// A server failing: the gap, and the transactions lost in it.
	"failover": {results.OutageSeconds, results.FailedTransactions},
}

// costMetrics follow a built-in workload's headline metrics when any of
// its records carries them: a fan-in's fairness; with the CPU probe, the datapath's own
// processes, then the whole path's cost per unit of work and, for paced
// points, its cores over the baseline's (see withOverBaseline).
var costMetrics = map[string][]string{
	"stream": {results.JainFairness, results.CPUCoresDatapath, results.CPUSecondsPerGigabyte},
	"rr":     {results.JainFairness, results.CPUCoresDatapath, results.CPUMicrosPerTransaction, results.CPUCoresOverBaseline},
	"crr":    {results.JainFairness, results.CPUCoresDatapath, results.CPUMicrosPerTransaction, results.CPUCoresOverBaseline},
}

// fallbackCostMetrics follow the headline metrics of any other workload
// when its records carry them.
var fallbackCostMetrics = []string{results.CPUSecondsPerGigabyte, results.CPUMicrosPerTransaction, results.CPUCoresOverBaseline}

// maxErrorLen is how many characters of a failed trial's error a row shows.
const maxErrorLen = 60

// Summary writes a plain-text summary of recs to w: one table per workload,
// in order of first appearance, with a block of rows per parameter point
// (params.Key(), in order of first appearance) and a row per datapath.
//
// Each cell of a headline metric (throughput_bps for stream;
// transactions_per_s, latency_p50_s and latency_p99_s for rr;
// connections_per_s and the two latencies for crr; then, when some record
// of the workload carries them, cpu_cores_datapath and the path's cost:
// cpu_seconds_per_gigabyte for stream, cpu_us_per_transaction and, at
// paced points, cpu_cores_over_baseline for rr and crr; for any other
// workload those of throughput_bps, transactions_per_s, connections_per_s,
// requests_per_s, latency_p50_s, latency_p99_s, cpu_seconds_per_gigabyte,
// cpu_us_per_transaction and cpu_cores_over_baseline its records carry) shows
// "median [lo, hi]" of the successful trials, as computed by
// stats.Summarize, in the unit FormatValue picks for the median. Every
// datapath other than the baseline has, after each metric, the change of its
// median against the baseline's median in percent ("-23.4%"), except
// cpu_cores_over_baseline, itself a difference to the baseline. Trials whose
// Error is set are left out of the statistics; their row ends with
// "(k of n trials failed: <first error>)". A value that cannot be given
// (no trials, no successful trial, no baseline to compare with) is "–".
//
// Below the tables, one line per kind of warning from stats.Summarize
// explains it; cells it applies to carry its marker (*, †, …), except that a
// kind applying to every cell is stated once without a marker. Warnings
// of the trials themselves (Record.Warnings, such as foreign CPU load) are
// kinds too, by the text before their first colon, and mark every cell of
// the rows whose successful trials carry them. A last line names the
// baseline (and one more says what cpu_cores_over_baseline is, when shown).
//
// Summary returns an error when recs is empty, when the baseline is not a
// known datapath, or when writing to w fails.
func Summary(w io.Writer, recs []results.Record, opts SummaryOptions) error {
	if len(recs) == 0 {
		return errors.New("summary: no records")
	}
	datapaths := displayOrder(recs, opts.Datapaths)
	baseline := opts.Baseline
	if baseline == "" {
		baseline = datapaths[0]
	}
	if !slices.Contains(datapaths, baseline) {
		return fmt.Errorf("summary: baseline %q is not among datapaths %s", baseline, strings.Join(datapaths, ", "))
	}
	recs = withOverBaseline(recs, baseline)

	tables := buildTables(recs, datapaths, baseline, opts.Metrics)
	notes := assignMarkers(tables)
	compare := len(datapaths) > 1

	var buf bytes.Buffer
	for i, t := range tables {
		if i > 0 {
			buf.WriteByte('\n')
		}
		writeTable(&buf, t, compare, notes)
	}
	writeConnectionFits(&buf, recs)
	buf.WriteByte('\n')
	for _, n := range notes.list {
		if n.marker == "" {
			buf.WriteString(n.text + "\n")
		} else {
			buf.WriteString(n.marker + " " + n.text + "\n")
		}
	}
	if compare {
		fmt.Fprintf(&buf, "Δ: change of the median against %s\n", baseline)
	}
	if slices.ContainsFunc(tables, func(t table) bool { return slices.Contains(t.metrics, results.CPUCoresOverBaseline) }) {
		fmt.Fprintf(&buf, "%s: the trial's %s less the median of %s's at the same params\n", results.CPUCoresOverBaseline, results.CPUCoresPath, baseline)
	}
	if _, err := w.Write(trimLines(buf.Bytes())); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// displayOrder lists the listed labels, then the other labels of recs in
// order of first appearance.
func displayOrder(recs []results.Record, listed []string) []string {
	var order []string
	for _, d := range listed {
		if !slices.Contains(order, d) {
			order = append(order, d)
		}
	}
	for _, r := range recs {
		if !slices.Contains(order, r.Datapath) {
			order = append(order, r.Datapath)
		}
	}
	return order
}

// table is one workload's rows.
type table struct {
	workload string
	metrics  []string
	groups   []group
}

// group is one parameter point: a row per datapath, in display order.
type group struct {
	params string
	rows   []row
}

type row struct {
	datapath string
	baseline bool
	trials   int // records, failed included; 0 means no records
	failed   int
	firstErr string
	cells    []cell // one per table metric
	// warnings are the Record.Warnings of its successful trials.
	warnings []string
}

type cell struct {
	s stats.Summary
	// partial is set when some successful trials lack the metric.
	partial bool
	// delta is the change against the baseline's median; NaN when it
	// cannot be given.
	delta float64
	// kinds are the warning kinds that apply, in the order found.
	kinds []string
}

func buildTables(recs []results.Record, datapaths []string, baseline string, metrics []string) []table {
	var tables []table
	byWorkload := map[string][]results.Record{}
	for _, r := range recs {
		if _, ok := byWorkload[r.Workload]; !ok {
			tables = append(tables, table{workload: r.Workload})
		}
		byWorkload[r.Workload] = append(byWorkload[r.Workload], r)
	}
	for i := range tables {
		t := &tables[i]
		wrecs := byWorkload[t.workload]
		t.metrics = chosenMetrics(metrics, t.workload, wrecs)

		var keys []string
		byKey := map[string][]results.Record{}
		for _, r := range wrecs {
			k := r.Params.Key()
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], r)
		}
		free := unlimitedBaseline(keys, byKey, baseline)
		for _, k := range keys {
			if _, ok := free[k]; ok {
				continue
			}
			grecs := byKey[k]
			base := free[unlimitedKey(grecs[0].Params)]
			if base != nil && !slices.ContainsFunc(grecs, func(r results.Record) bool { return r.Datapath == baseline }) {
				grecs = append(slices.Clip(grecs), base...)
			}
			g := buildGroup(k, grecs, t.metrics, datapaths, baseline)
			if base != nil {
				for i := range g.rows {
					if g.rows[i].baseline {
						g.rows[i].datapath += " (no limit)"
					}
				}
			}
			t.groups = append(t.groups, g)
		}
	}
	return tables
}

// unlimitedBaseline finds the points that only the baseline ran, without
// CPU limits, beside points of other datapaths with limits (a limit applies
// only to the datapaths with the component it names): it maps each such
// point's key to its records, which stand in as the baseline row, marked
// "(no limit)", of every limited point that differs only by its limits.
func unlimitedBaseline(keys []string, byKey map[string][]results.Record, baseline string) map[string][]results.Record {
	limited := map[string]bool{}
	for _, k := range keys {
		if u := unlimitedKey(byKey[k][0].Params); u != k {
			limited[u] = true
		}
	}
	out := map[string][]results.Record{}
	for _, k := range keys {
		onlyBase := !slices.ContainsFunc(byKey[k], func(r results.Record) bool { return r.Datapath != baseline })
		if limited[k] && onlyBase && unlimitedKey(byKey[k][0].Params) == k {
			out[k] = byKey[k]
		}
	}
	return out
}

// unlimitedKey is the key of p without its CPU limit parameters.
func unlimitedKey(p results.Params) string {
	q := results.Params{}
	for k, v := range p {
		if !IsCPULimitParam(k) {
			q[k] = v
		}
	}
	return q.Key()
}

// metricsFor returns the headline metrics of a workload.
func metricsFor(workload string, recs []results.Record) []string {
	if m, ok := headlineMetrics[workload]; ok {
		return append(slices.Clip(m), present(costMetrics[workload], recs)...)
	}
	ms := append(present(fallbackMetrics, recs), present(ControlPlaneMetrics, recs)...)
	return append(ms, present(fallbackCostMetrics, recs)...)
}

// chosenMetrics returns the metrics of chosen that recs carry, or the
// workload's headline metrics when there are none (or none chosen).
func chosenMetrics(chosen []string, workload string, recs []results.Record) []string {
	if ms := present(chosen, recs); len(ms) > 0 {
		return ms
	}
	return metricsFor(workload, recs)
}

// present returns the metrics of names that some record of recs carries.
func present(names []string, recs []results.Record) []string {
	var out []string
	for _, m := range names {
		for _, r := range recs {
			if _, ok := r.Metrics[m]; ok {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func buildGroup(key string, recs []results.Record, metrics, datapaths []string, baseline string) group {
	g := group{params: key}
	for _, d := range datapaths {
		rw := row{datapath: d, baseline: d == baseline}
		vals := make([][]float64, len(metrics))
		partial := make([]bool, len(metrics))
		for _, r := range recs {
			if r.Datapath != d {
				continue
			}
			rw.trials++
			if r.Error != "" {
				if rw.failed == 0 {
					rw.firstErr = r.Error
				}
				rw.failed++
				continue
			}
			rw.warnings = append(rw.warnings, r.Warnings...)
			for i, m := range metrics {
				if v, ok := r.Metrics[m]; ok {
					vals[i] = append(vals[i], v)
				} else {
					partial[i] = true
				}
			}
		}
		for i := range metrics {
			c := cell{s: stats.Summarize(vals[i]), delta: math.NaN()}
			c.partial = partial[i] && c.s.N > 0
			rw.cells = append(rw.cells, c)
		}
		g.rows = append(g.rows, rw)
	}
	var base *row
	for i := range g.rows {
		if g.rows[i].baseline {
			base = &g.rows[i]
		}
	}
	for i := range g.rows {
		rw := &g.rows[i]
		for j := range rw.cells {
			c := &rw.cells[j]
			if !rw.baseline && base != nil && base.cells[j].s.N > 0 && c.s.N > 0 && metrics[j] != results.CPUCoresOverBaseline {
				c.delta = stats.ChangePct(base.cells[j].s.Median, c.s.Median)
			}
		}
	}
	return g
}

// Warning kinds that are not the text of a warning itself.
const (
	kindHighVariance = "high variance"
	kindNaN          = "dropped NaN"
	kindPartial      = "partial"
	// kindTrial prefixes the kind of a trial's own warning.
	kindTrial = "trial: "
)

// trialWarningKind is the kind of a Record warning: kindTrial and the text
// before its first colon ("foreign CPU").
func trialWarningKind(w string) string {
	head, _, _ := strings.Cut(w, ":")
	return kindTrial + strings.TrimSpace(head)
}

// warningKind maps a stats.Summary warning to the kind it is grouped under;
// "" means the warning needs no note (an empty cell already shows "–").
func warningKind(w string) string {
	switch {
	case w == "no samples":
		return ""
	case strings.HasPrefix(w, "high variance"):
		return kindHighVariance
	case strings.HasPrefix(w, "dropped "):
		return kindNaN
	}
	return w
}

// note is one footnote: a warning kind, its marker ("" when it applies to
// every cell) and its text.
type note struct {
	kind   string
	marker string
	text   string
}

type notes struct {
	list   []note
	marker map[string]string // kind → marker
}

// trialNote is what the note of a trial warning kind says: how many trials
// carry it and the first one's text.
type trialNote struct {
	trials int
	first  string
}

var markerSymbols = []string{"*", "†", "‡", "§", "¶", "#"}

// assignMarkers sets each cell's kinds and numbers the kinds in the order
// they are first met.
func assignMarkers(tables []table) notes {
	var kinds []string
	count := map[string]int{}
	maxCV := 0.0
	cells := 0
	trial := map[string]*trialNote{}
	for ti := range tables {
		for gi := range tables[ti].groups {
			for ri := range tables[ti].groups[gi].rows {
				rw := &tables[ti].groups[gi].rows[ri]
				var rowKinds []string
				for _, w := range rw.warnings {
					k := trialWarningKind(w)
					if trial[k] == nil {
						trial[k] = &trialNote{first: w}
					}
					trial[k].trials++
					if !slices.Contains(rowKinds, k) {
						rowKinds = append(rowKinds, k)
					}
				}
				for ci := range rw.cells {
					c := &rw.cells[ci]
					if c.s.N == 0 {
						continue // shown as "–", without markers
					}
					cells++
					for _, w := range c.s.Warnings {
						k := warningKind(w)
						if k == kindHighVariance && !hasDelta(tables[ti].metrics[ci]) {
							continue // a difference around 0: its stddev/|mean| says nothing
						}
						if k != "" && !slices.Contains(c.kinds, k) {
							c.kinds = append(c.kinds, k)
						}
					}
					if c.partial {
						c.kinds = append(c.kinds, kindPartial)
					}
					c.kinds = append(c.kinds, rowKinds...)
					for _, k := range c.kinds {
						if count[k] == 0 {
							kinds = append(kinds, k)
						}
						count[k]++
						if k == kindHighVariance {
							maxCV = max(maxCV, c.s.Stddev/math.Abs(c.s.Mean))
						}
					}
				}
			}
		}
	}

	ns := notes{marker: map[string]string{}}
	used := 0
	for _, k := range kinds {
		n := note{kind: k, text: noteText(k, maxCV)}
		if tn := trial[k]; tn != nil {
			n.text = trialNoteText(tn.trials, tn.first)
		}
		if count[k] < cells {
			n.marker = markerSymbol(used)
			used++
			ns.marker[k] = n.marker
		} else {
			n.text = "every cell: " + n.text
		}
		ns.list = append(ns.list, n)
	}
	return ns
}

func markerSymbol(i int) string {
	sym := markerSymbols[i%len(markerSymbols)]
	return strings.Repeat(sym, i/len(markerSymbols)+1)
}

func noteText(kind string, maxCV float64) string {
	switch kind {
	case kindHighVariance:
		return fmt.Sprintf("high variance: stddev/|mean| above %.0f%% (up to %.0f%%)", stats.HighVariance*100, maxCV*100)
	case kindNaN:
		return "NaN values were dropped"
	case kindPartial:
		return "metric missing from some successful trials; summary of the others"
	}
	return kind
}

func writeTable(buf *bytes.Buffer, t table, compare bool, ns notes) {
	fmt.Fprintf(buf, "%s\n", t.workload)
	tw := tabwriter.NewWriter(buf, 0, 8, 2, ' ', 0)
	header := []string{"params", "datapath"}
	for _, m := range t.metrics {
		header = append(header, m)
		if compare && hasDelta(m) {
			header = append(header, "Δ")
		}
	}
	writeRow(tw, append(header, ""))
	for _, g := range t.groups {
		for i, rw := range g.rows {
			params := ""
			if i == 0 {
				params = g.params
				if params == "" {
					params = "(none)"
				}
			}
			line := []string{params, rw.datapath}
			for j, m := range t.metrics {
				c := rw.cells[j]
				text := "–"
				if c.s.N > 0 {
					text = formatInterval(m, c.s.Median, c.s.Lo, c.s.Hi)
					for _, k := range c.kinds {
						text += ns.marker[k]
					}
				}
				line = append(line, text)
				if compare && hasDelta(m) {
					line = append(line, deltaText(rw, c))
				}
			}
			line = append(line, failureText(rw))
			writeRow(tw, line)
		}
	}
	tw.Flush() // writes to a bytes.Buffer, which cannot fail
}

func writeRow(w io.Writer, cells []string) {
	io.WriteString(w, strings.Join(cells, "\t")+"\n")
}

func deltaText(rw row, c cell) string {
	switch {
	case rw.baseline:
		return ""
	case math.IsNaN(c.delta) || math.IsInf(c.delta, 0):
		return "–"
	case math.Abs(c.delta) < 0.05:
		return "0.0%"
	}
	return fmt.Sprintf("%+.1f%%", c.delta)
}

func failureText(rw row) string {
	if rw.failed == 0 {
		return ""
	}
	return fmt.Sprintf("(%d of %d trials failed: %s)", rw.failed, rw.trials, truncate(oneLine(rw.firstErr), maxErrorLen))
}

// oneLine turns whitespace runs, newlines and tabs included, into single
// spaces so an error cannot break the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate shortens s to at most n characters, ending in "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// trimLines removes trailing spaces that tabwriter leaves after the last
// non-empty cell.
func trimLines(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, " ")
	}
	return bytes.Join(lines, []byte("\n"))
}

// trialNoteText is the note of a trial warning kind carried by n trials.
func trialNoteText(n int, first string) string {
	if n == 1 {
		return "1 trial warns: " + oneLine(first)
	}
	return fmt.Sprintf("%d trials warn, the first: %s", n, oneLine(first))
}

// hasDelta says whether metric gets a Δ column: every metric but
// cpu_cores_over_baseline, itself a difference to the baseline.
func hasDelta(metric string) bool { return metric != results.CPUCoresOverBaseline }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
