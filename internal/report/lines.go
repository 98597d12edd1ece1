package report

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// This file builds the report's sweep lines and control-plane table once
// from the records; html.go and markdown.go render them.

// SitesParam is the matrix parameter of a sweep of the number of sites.
const SitesParam = "sites"

// Metrics a sites sweep records once per (repetition, datapath, sites)
// group (see runner.DatapathSetupSeconds and its neighbours).
var groupCostMetrics = []string{"datapath_setup_s", "idle_cpu_cores_per_site", "idle_rss_bytes_per_site"}

// workloadCostMetrics are the per-trial costs drawn against the number of
// sites when a workload's records carry them.
var workloadCostMetrics = []string{results.CPUSecondsPerGigabyte, results.CPUMicrosPerTransaction, results.CPUCoresDatapath}

// ControlPlaneMetrics are the timings (and counts) the control-plane table
// shows, in this order, for every workload whose records carry them:
// tunnel-up's, discovery's checkpoints and failover's. A workload that adds
// a control-plane metric names it here and nowhere else.
var ControlPlaneMetrics = []string{
	results.SetupSeconds, results.TunnelUpSeconds, results.TeardownSeconds,
	"discovery_s", "process_ready_s", "route_installed_s", "first_connect_s", "first_response_s",
	"outage_s", "failed_transactions",
}

// lineSet is one chart of lines: a metric against a swept parameter, a
// series per datapath of each run, at one point of the other parameters.
type lineSet struct {
	title    string
	workload string // "" for a group metric of a sites sweep
	metric   string
	others   string // params key of the other parameters
	xLabel   string
	xFmt     func(float64) string
	xs       []float64 // every x of any series, ascending
	series   []lineSetSeries
}

type lineSetSeries struct {
	id     seriesID
	points []lineSetPoint
}

// lineSetPoint is a line's point: the Summary of the values at x.
type lineSetPoint struct {
	x float64
	s stats.Summary
}

// sweepAxis is a parameter drawn on the x axis.
type sweepAxis struct {
	name, label string
	// x reads the parameter's value; ok false when it does not apply.
	x   func(v any) (float64, bool)
	fmt func(float64) string
}

var sitesAxis = sweepAxis{name: "number of sites", label: "number of sites",
	x:   func(v any) (float64, bool) { return numeric(v) },
	fmt: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }}

// rttAxis is 2 × the one-way delay the emulator adds: the round trip it
// adds, not the path's whole round-trip time.
func rttAxis(param string) sweepAxis {
	name := "RTT"
	if link, ok := strings.CutPrefix(strings.TrimSuffix(param, ".delay"), "wan.link."); ok {
		name = "RTT added on link " + link
	}
	return sweepAxis{name: name, label: "RTT added by the WAN emulator (2 × " + param + ")",
		x: func(v any) (float64, bool) {
			s, ok := v.(string)
			if !ok {
				return 0, false
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return 0, false
			}
			return 2 * d.Seconds(), true
		},
		fmt: func(v float64) string {
			if v == 0 {
				return "0"
			}
			return FormatValue(results.LatencyP50, v)
		}}
}

// delayParam reports whether name is a swept one-way delay: wan.delay or a
// link's wan.link.A-B.delay.
func delayParam(name string) bool {
	return name == results.WANDelayParam || (strings.HasPrefix(name, "wan.link.") && strings.HasSuffix(name, ".delay"))
}

// runDatapaths is run r's datapaths in display order: as its scenario
// lists them, then by first appearance.
func runDatapaths(r Run) []string {
	var listed []string
	for _, d := range scenarioOf(r).Datapaths {
		if d.Label != "" && slices.ContainsFunc(r.Records, func(rec results.Record) bool { return rec.Datapath == d.Label }) {
			listed = append(listed, d.Label)
		}
	}
	return displayOrder(r.Records, listed)
}

// buildLines returns the report's lines: per datapath, the cost of a sites
// sweep against the number of sites (the group metrics once per workload-
// independent chart, each workload's cost per unit of work), and each
// workload's rate and latency p50 against the RTT a swept delay adds. A
// point is the Summary over the repetitions at that x: for group metrics,
// one value per (run, repetition, datapath, sites) group; otherwise one per
// successful trial. A chart needs two x values.
func buildLines(runs []Run) []lineSet {
	var ids []seriesID
	for ri, r := range runs {
		for _, d := range runDatapaths(r) {
			ids = append(ids, seriesID{ri, d})
		}
	}
	var charts []lineSet

	// Group costs of a sites sweep, workload-independent.
	for _, m := range groupCostMetrics {
		vals := map[seriesID]map[float64][]float64{}
		seen := map[string]bool{}
		for ri, r := range runs {
			for _, rec := range r.Records {
				v, ok := rec.Metrics[m]
				x, xok := sitesAxis.x(rec.Params[SitesParam])
				if !ok || !xok {
					continue
				}
				key := fmt.Sprint(ri, "|", rec.Rep, "|", rec.Datapath, "|", x)
				if seen[key] {
					continue
				}
				seen[key] = true
				id := seriesID{ri, rec.Datapath}
				if vals[id] == nil {
					vals[id] = map[float64][]float64{}
				}
				vals[id][x] = append(vals[id][x], v)
			}
		}
		if c, ok := makeChart(metricLabel(m)+" vs number of sites", "", m, "", sitesAxis, ids, map[string]map[seriesID]map[float64][]float64{"": vals}); ok {
			charts = append(charts, c...)
		}
	}

	// Per-workload lines: costs against sites, rate and latency against RTT.
	type job struct {
		param   string
		axis    sweepAxis
		metrics func(wl string) []string
	}
	workloads, byWL := recordsByWorkload(runs)
	for _, wl := range workloads {
		params := map[string]bool{}
		for _, rr := range byWL[wl] {
			for n := range rr.rec.Params {
				params[n] = true
			}
		}
		var jobs []job
		if params[SitesParam] {
			jobs = append(jobs, job{SitesParam, sitesAxis, func(string) []string { return workloadCostMetrics }})
		}
		for _, n := range sortedKeys(params) {
			if delayParam(n) {
				jobs = append(jobs, job{n, rttAxis(n), func(wl string) []string {
					return []string{rateMetricOf(wl, byWL[wl]), results.LatencyP50}
				}})
			}
		}
		for _, j := range jobs {
			for _, m := range j.metrics(wl) {
				if m == "" {
					continue
				}
				byOther := map[string]map[seriesID]map[float64][]float64{}
				for _, rr := range byWL[wl] {
					rec := rr.rec
					v, ok := rec.Metrics[m]
					x, xok := j.axis.x(rec.Params[j.param])
					if rec.Error != "" || !ok || !xok {
						continue
					}
					rest := results.Params{}
					for n, pv := range rec.Params {
						if n != j.param {
							rest[n] = pv
						}
					}
					ok2 := rest.Key()
					id := seriesID{rr.run, rec.Datapath}
					if byOther[ok2] == nil {
						byOther[ok2] = map[seriesID]map[float64][]float64{}
					}
					if byOther[ok2][id] == nil {
						byOther[ok2][id] = map[float64][]float64{}
					}
					byOther[ok2][id][x] = append(byOther[ok2][id][x], v)
				}
				title := metricLabel(m) + " vs " + j.axis.name
				if c, ok := makeChart(title, wl, m, j.param, j.axis, ids, byOther); ok {
					charts = append(charts, c...)
				}
			}
		}
	}
	return charts
}

type runRecord struct {
	run int
	rec results.Record
}

// recordsByWorkload groups the runs' records by workload, workloads in order
// of first appearance.
func recordsByWorkload(runs []Run) ([]string, map[string][]runRecord) {
	var order []string
	by := map[string][]runRecord{}
	for ri, r := range runs {
		for _, rec := range r.Records {
			if _, ok := by[rec.Workload]; !ok {
				order = append(order, rec.Workload)
			}
			by[rec.Workload] = append(by[rec.Workload], runRecord{ri, rec})
		}
	}
	return order, by
}

// rateMetricOf is the workload's headline rate among its records.
func rateMetricOf(wl string, recs []runRecord) string {
	for _, m := range []string{results.ThroughputBPS, results.TransactionsPerS, results.ConnectionsPerS, results.RequestsPerS} {
		for _, rr := range recs {
			if _, ok := rr.rec.Metrics[m]; ok {
				return m
			}
		}
	}
	return ""
}

// makeChart turns values by other-params key, series and x into charts,
// one per other-params key with at least two x values.
func makeChart(title, wl, metric, param string, ax sweepAxis, ids []seriesID, byOther map[string]map[seriesID]map[float64][]float64) ([]lineSet, bool) {
	var out []lineSet
	for _, other := range sortedKeys(byOther) {
		vals := byOther[other]
		c := lineSet{title: title, workload: wl, metric: metric, others: other, xLabel: ax.label, xFmt: ax.fmt}
		for _, id := range ids {
			byX := vals[id]
			if len(byX) == 0 {
				continue
			}
			s := lineSetSeries{id: id}
			for x, vs := range byX {
				s.points = append(s.points, lineSetPoint{x: x, s: stats.Summarize(vs)})
				if !slices.Contains(c.xs, x) {
					c.xs = append(c.xs, x)
				}
			}
			sort.Slice(s.points, func(i, j int) bool { return s.points[i].x < s.points[j].x })
			c.series = append(c.series, s)
		}
		if len(c.xs) < 2 {
			continue
		}
		slices.Sort(c.xs)
		if wl != "" {
			c.title += " · " + wl
		}
		if other != "" {
			c.title += " " + shortParams(other)
		}
		out = append(out, c)
	}
	return out, len(out) > 0
}

// controlPlaneRow is one row of the control-plane table.
type controlPlaneRow struct {
	id               seriesID
	workload, params string
	metric           string
	s                stats.Summary
	p90, p99         float64
}

// buildControlPlane returns, per run, workload, parameter point and
// datapath, the percentiles over successful trials of each of
// ControlPlaneMetrics the records carry.
func buildControlPlane(runs []Run) []controlPlaneRow {
	var rows []controlPlaneRow
	workloads, byWL := recordsByWorkload(runs)
	for _, wl := range workloads {
		type cell struct {
			id     seriesID
			params string
		}
		var cells []cell
		vals := map[cell]map[string][]float64{}
		for _, rr := range byWL[wl] {
			if rr.rec.Error != "" {
				continue
			}
			c := cell{seriesID{rr.run, rr.rec.Datapath}, rr.rec.Params.Key()}
			for _, m := range ControlPlaneMetrics {
				v, ok := rr.rec.Metrics[m]
				if !ok {
					continue
				}
				if vals[c] == nil {
					vals[c] = map[string][]float64{}
					cells = append(cells, c)
				}
				vals[c][m] = append(vals[c][m], v)
			}
		}
		// Order: run, then datapath in display order, then params.
		order := map[seriesID]int{}
		for ri, r := range runs {
			for i, d := range runDatapaths(r) {
				order[seriesID{ri, d}] = ri*10000 + i
			}
		}
		sort.SliceStable(cells, func(i, j int) bool {
			if a, b := order[cells[i].id], order[cells[j].id]; a != b {
				return a < b
			}
			return cells[i].params < cells[j].params
		})
		for _, c := range cells {
			for _, m := range ControlPlaneMetrics {
				vs, ok := vals[c][m]
				if !ok {
					continue
				}
				rows = append(rows, controlPlaneRow{id: c.id, workload: wl, params: c.params, metric: m,
					s: stats.Summarize(vs), p90: quantile(vs, 0.90), p99: quantile(vs, 0.99)})
			}
		}
	}
	return rows
}

// quantile is the q-quantile of xs by linear interpolation between order
// statistics (R's type 7); NaN for no values.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := q * float64(len(s)-1)
	i := int(math.Floor(h))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// sweepNote says what a line's point is.
const sweepNote = "Per datapath, the median over repetitions at each value of the swept parameter (error bars: the confidence interval of the median). " +
	"Costs of a sites sweep (setup, idle CPU and RSS per site) count once per repetition, datapath and number of sites. " +
	"RTT is twice the one-way delay the WAN emulator adds: the path's own round trip comes on top."

// controlPlaneNote heads the control-plane table.
const controlPlaneNote = "Percentiles over the successful trials (p90 and p99 interpolated between trials: with few repetitions they approach the largest)."

// linesSection draws buildLines' charts.
func (ix *index) linesSection(runs []Run) htmlSection {
	sec := htmlSection{Heading: "Lines: cost against sites, rate against RTT", Note: sweepNote}
	for _, c := range buildLines(runs) {
		spec := lineChartSpec{title: c.title, xLabel: c.xLabel, yLabel: metricLabel(c.metric), xTicks: c.xs, xFmt: c.xFmt, yFmt: fmtFor(c.metric)}
		for _, s := range c.series {
			ls := lineSeries{name: ix.names[s.id], colour: ix.colours[s.id]}
			for _, p := range s.points {
				ls.points = append(ls.points, point{x: p.x, y: p.s.Median, lo: p.s.Lo, hi: p.s.Hi, hasCI: p.s.N > 1})
			}
			spec.series = append(spec.series, ls)
		}
		if h := lineChart(spec); h != "" {
			sec.Charts = append(sec.Charts, h)
		}
	}
	return sec
}

// controlPlaneTable renders buildControlPlane's rows.
func (ix *index) controlPlaneTable(runs []Run) htmlTable {
	t := htmlTable{Caption: controlPlaneNote, Head: controlPlaneHead}
	for _, r := range buildControlPlane(runs) {
		t.Rows = append(t.Rows, r.cells(ix.names[r.id]))
	}
	return t
}

var controlPlaneHead = []string{"datapath", "workload", "params", "metric", "n", "p50", "p90", "p99", "max"}

func (r controlPlaneRow) cells(name string) []string {
	f := func(v float64) string { return FormatValue(r.metric, v) }
	return []string{name, r.workload, shortParams(r.params), r.metric, strconv.Itoa(r.s.N), f(r.s.Median), f(r.p90), f(r.p99), f(r.s.Max)}
}

// writeLinesMD writes the lines as Markdown tables (a row per datapath, a
// column per x) and the control-plane table; nothing when there are none.
func writeLinesMD(buf *bytes.Buffer, runs []Run, labels []string) {
	name := func(id seriesID) string {
		if len(runs) > 1 {
			return id.datapath + " (" + labels[id.run] + ")"
		}
		return id.datapath
	}
	if sets := buildLines(runs); len(sets) > 0 {
		buf.WriteString("## Lines: cost against sites, rate against RTT\n\n")
		fmt.Fprintf(buf, "%s\n\n", mdEscape(sweepNote))
		for _, c := range sets {
			fmt.Fprintf(buf, "**%s** (x: %s)\n\n", mdEscape(c.title), mdEscape(c.xLabel))
			head, sep := []string{"datapath"}, []string{"---"}
			for _, x := range c.xs {
				head, sep = append(head, c.xFmt(x)), append(sep, "--:")
			}
			writeMDRow(buf, head)
			writeMDRow(buf, sep)
			for _, s := range c.series {
				row := []string{name(s.id)}
				for _, x := range c.xs {
					text := "–"
					for _, p := range s.points {
						if p.x == x {
							text = formatInterval(c.metric, p.s.Median, p.s.Lo, p.s.Hi)
						}
					}
					row = append(row, text)
				}
				writeMDRow(buf, row)
			}
			buf.WriteByte('\n')
		}
	}
	if rows := buildControlPlane(runs); len(rows) > 0 {
		buf.WriteString("## Control-plane timings\n\n")
		fmt.Fprintf(buf, "%s\n\n", mdEscape(controlPlaneNote))
		writeMDRow(buf, controlPlaneHead)
		sep := []string{"---", "---", "---", "---"}
		for range controlPlaneHead[4:] {
			sep = append(sep, "--:")
		}
		writeMDRow(buf, sep)
		for _, r := range rows {
			writeMDRow(buf, r.cells(name(r.id)))
		}
		buf.WriteByte('\n')
	}
}
