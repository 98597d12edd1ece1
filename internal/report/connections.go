package report

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spanperf/spanperf/internal/results"
)

// connectionsWorkload is the workload whose records ConnectionFits reads.
const connectionsWorkload = "connections"

// DatapathProcesses is the ConnectionFit.Component of the fit over every
// process of the datapath together (results.RSSBytesDatapath).
const DatapathProcesses = "(all processes)"

// ConnectionFit is the least-squares line of one component's RSS while
// its connections were held (results.RSSBytes) against the connections
// held (results.OpenConnections), over the successful trials of one
// datapath at every level of a connections sweep: its slope is
// results.RSSBytesPerConnection. Each trial's own two-point figure, from
// the idle RSS to that level, is results.RSSBytesAddedPerConnection in its
// record.
type ConnectionFit struct {
	// Datapath is the datapath's label; Component the component's name,
	// or DatapathProcesses.
	Datapath, Component string
	// Params is the key of the parameters other than count.
	Params string
	// Slope is the RSS added per open connection, in bytes; Intercept the
	// line's RSS at 0 connections, in bytes; R2 its coefficient of
	// determination (NaN from two trials, which always fit exactly, or
	// when every trial read the same RSS).
	Slope, Intercept, R2 float64
	// Idle is the median of the trials' idle RSS (results.RSSBytesIdle):
	// beside Intercept, it shows how straight the line is down to 0.
	Idle float64
	// Levels are the distinct counts of open connections, ascending;
	// Trials the number of trials fitted.
	Levels []float64
	Trials int
}

// ConnectionFits fits, per datapath, per point of the parameters other
// than count and per component, the connections workload's RSS against
// the connections held. A fit needs trials at two levels at least; the
// others are left out. Fits are ordered as the datapaths first appear,
// then by parameters, each datapath's components in name order and
// DatapathProcesses last.
func ConnectionFits(recs []results.Record) []ConnectionFit {
	type key struct{ datapath, params, comp string }
	type pts struct{ x, y, idle []float64 }
	var order []key
	data := map[key]*pts{}
	for _, r := range recs {
		if r.Workload != connectionsWorkload || r.Error != "" {
			continue
		}
		x, ok := r.Metrics[results.OpenConnections]
		if !ok || x <= 0 {
			continue
		}
		rest := results.Params{}
		for k, v := range r.Params {
			if k != "count" {
				rest[k] = v
			}
		}
		var comps []string
		for m := range r.Metrics {
			if c, ok := componentIn(m, results.RSSBytes); ok {
				comps = append(comps, c)
			}
		}
		slices.Sort(comps)
		if _, ok := r.Metrics[results.RSSBytesDatapath]; ok {
			comps = append(comps, DatapathProcesses)
		}
		for _, c := range comps {
			y, idleName := r.Metrics[results.For(results.RSSBytes, c)], results.For(results.RSSBytesIdle, c)
			if c == DatapathProcesses {
				y, idleName = r.Metrics[results.RSSBytesDatapath], results.RSSBytesIdleDatapath
			}
			k := key{r.Datapath, rest.Key(), c}
			if data[k] == nil {
				data[k] = &pts{}
				order = append(order, k)
			}
			d := data[k]
			d.x, d.y = append(d.x, x), append(d.y, y)
			if v, ok := r.Metrics[idleName]; ok {
				d.idle = append(d.idle, v)
			}
		}
	}
	var out []ConnectionFit
	for _, k := range order {
		d := data[k]
		levels := slices.Clone(d.x)
		slices.Sort(levels)
		levels = slices.Compact(levels)
		if len(levels) < 2 {
			continue
		}
		f := ConnectionFit{Datapath: k.datapath, Component: k.comp, Params: k.params, Levels: levels, Trials: len(d.x), Idle: math.NaN()}
		f.Slope, f.Intercept, f.R2 = leastSquares(d.x, d.y)
		if len(d.idle) > 0 {
			slices.Sort(d.idle)
			f.Idle = d.idle[len(d.idle)/2]
		}
		out = append(out, f)
	}
	return out
}

// componentIn returns C when m is metric{C}.
func componentIn(m, metric string) (string, bool) {
	rest, ok := strings.CutPrefix(m, metric+"{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}

// leastSquares fits y = slope·x + intercept; r² is NaN from two points
// or when y does not vary.
func leastSquares(x, y []float64) (slope, intercept, r2 float64) {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	slope = sxy / sxx
	intercept = my - slope*mx
	r2 = math.NaN()
	if len(x) > 2 && syy > 0 { // two points always lie on their line
		r2 = sxy * sxy / (sxx * syy)
	}
	return slope, intercept, r2
}

// connectionFitTable is the fits of recs as a table's header and rows,
// rendered as text by writeConnectionFits and as Markdown by
// writeConnectionFitsMD; no rows when there is no fit.
func connectionFitTable(recs []results.Record) (head []string, rows [][]string) {
	head = []string{"params", "datapath", "component", "bytes/connection", "intercept", "idle", "r²", "levels", "trials"}
	for _, f := range ConnectionFits(recs) {
		params := f.Params
		if params == "" {
			params = "(none)"
		}
		var levels []string
		for _, l := range f.Levels {
			levels = append(levels, FormatValue(results.OpenConnections, l))
		}
		idle := "–"
		if !math.IsNaN(f.Idle) {
			idle = FormatValue(results.RSSBytes, f.Idle)
		}
		rows = append(rows, []string{params, f.Datapath, f.Component, FormatValue(results.RSSBytes, f.Slope), FormatValue(results.RSSBytes, f.Intercept),
			idle, r2Text(f.R2), strings.Join(levels, ", "), fmt.Sprint(f.Trials)})
	}
	return head, rows
}

// connectionFitTitle and connectionFitNote say what the table shows.
var (
	connectionFitTitle = fmt.Sprintf("memory per open connection: %s, the least-squares slope of %s{COMPONENT} against %s over the sweep's levels",
		results.RSSBytesPerConnection, results.RSSBytes, results.OpenConnections)
	connectionFitNote = fmt.Sprintf("each trial's own figure, from its idle RSS to its level, is %s{COMPONENT} in its record; "+
		"idle: the median of the trials' idle RSS (each trial sets its datapath up afresh); r² needs more than two trials", results.RSSBytesAddedPerConnection)
)

// writeConnectionFits writes the fits of recs, if any, as a table below
// the summary's.
func writeConnectionFits(buf *bytes.Buffer, recs []results.Record) {
	head, rows := connectionFitTable(recs)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(buf, "\n%s\n", connectionFitTitle)
	tw := tabwriter.NewWriter(buf, 0, 8, 2, ' ', 0)
	writeRow(tw, head)
	for _, r := range rows {
		writeRow(tw, r)
	}
	tw.Flush()
	fmt.Fprintf(buf, "%s\n", connectionFitNote)
}

// writeConnectionFitsMD writes the fits of a run's records, if any, as a
// Markdown table headed by the run's label.
func writeConnectionFitsMD(buf *bytes.Buffer, label string, recs []results.Record) {
	head, rows := connectionFitTable(recs)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(buf, "%s (%s)\n\n", mdEscape(connectionFitTitle), mdEscape(label))
	writeMDRow(buf, head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	writeMDRow(buf, sep)
	for _, r := range rows {
		writeMDRow(buf, r)
	}
	fmt.Fprintf(buf, "\n%s\n\n", mdEscape(connectionFitNote))
}

func r2Text(r2 float64) string {
	if math.IsNaN(r2) {
		return "–"
	}
	return fmt.Sprintf("%.3f", r2)
}

// connectionsSection draws, for the connections workload, each
// datapath's RSS (all its processes) against the connections held: a line
// per datapath, a point per parameter point (the medians, with the RSS's
// interval).
func (ix *index) connectionsSection(wl string, ids []seriesID) htmlSection {
	sec := htmlSection{Heading: "memory per open connection", Note: "RSS of all the datapath's processes while the connections were held: median of the successful trials, error bars its confidence interval; a datapath without a process of its own (native) has no line. The summary gives each component's slope."}
	if wl != connectionsWorkload {
		return sec
	}
	spec := lineChartSpec{title: "RSS vs open connections · " + wl, xLabel: "open connections", yLabel: "RSS",
		xFmt: func(v float64) string { return FormatValue(results.OpenConnections, v) }, yFmt: func(v float64) string { return FormatValue(results.RSSBytes, v) }}
	for _, id := range ids {
		s := lineSeries{name: ix.names[id], colour: ix.colours[id]}
		for _, k := range ix.keys[wl] {
			c := cellID{id.run, wl, k, id.datapath}
			x, y := ix.summary(c, results.OpenConnections), ix.summary(c, results.RSSBytesDatapath)
			if x.N > 0 && y.N > 0 {
				s.points = append(s.points, point{x: x.Median, y: y.Median, lo: y.Lo, hi: y.Hi, hasCI: y.N > 1})
			}
		}
		slices.SortFunc(s.points, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		if len(s.points) > 0 {
			spec.series = append(spec.series, s)
		}
	}
	if c := lineChart(spec); c != "" {
		sec.Charts = append(sec.Charts, c)
	}
	return sec
}
