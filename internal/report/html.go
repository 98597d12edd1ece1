package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// HTML writes a self-contained HTML report of runs to w: one file with inline
// CSS and inline SVG charts, no scripts and no network fetches, readable in
// any browser with JavaScript off.
//
// It shows what was run (scenario, machine, spanperf version, repetitions,
// duration, warnings), a normalized overview per run (every headline metric
// scaled to 0–1 among the run's datapaths, as a radar and a table), then per
// workload: the headline rate per datapath with 95% confidence intervals
// (against message size when the workload has a message_size parameter),
// latency percentiles, the latency percentile curve of the merged
// histograms on a 1/(1-p) axis, per-second series of every trial, CPU per
// component (stacked), efficiency (rate per path core, the path's CPU per
// gigabyte or per transaction, at paced points its cores over the
// baseline's, joules per gigabyte marked when estimated), overhead against the baseline in percent, and the
// warnings that apply; then the sizing tables and the reference figures.
//
// Datapaths are ordered as the scenario lists them, then by first
// appearance. The baseline is opts.Baseline, else the scenario's baseline,
// else the run's first datapath. With several runs, each run's datapaths are
// separate series labelled "datapath (run dir)".
//
// HTML returns an error when runs hold no records or writing fails.
func HTML(w io.Writer, runs []Run, opts Options) error {
	opts.Normalize()
	n := 0
	for _, r := range runs {
		n += len(r.Records)
	}
	if n == 0 {
		return errors.New("html report: no records")
	}
	ix := newIndex(runs, opts.Baseline)
	page := htmlPage{Title: opts.Title, Reference: opts.Reference}
	for ri := range runs {
		page.Runs = append(page.Runs, ix.runInfo(ri))
		if ov := ix.overview(ri); ov != nil {
			page.Overviews = append(page.Overviews, *ov)
		}
		var buf bytes.Buffer
		sopts := SizingOptions{Baseline: ix.baselines[ri], Cells: SizingCells(scenarioOf(runs[ri]).SizingCells)}
		if ok, err := Sizing(&buf, runs[ri].Records, sopts); err == nil && ok {
			page.Sizing = append(page.Sizing, htmlPre{Label: ix.runLabels[ri], Text: buf.String()})
		}
	}
	page.Lines, page.ControlPlane = ix.linesSection(runs), ix.controlPlaneTable(runs)
	for _, wl := range ix.workloads {
		page.Workloads = append(page.Workloads, ix.workload(wl))
	}
	var out bytes.Buffer
	if err := htmlTemplate.Execute(&out, page); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return nil
}

// htmlPage is what the template renders.
type htmlPage struct {
	Title     string
	Runs      []htmlRun
	Overviews []htmlOverview
	// Lines are the sweeps' lines (cost against sites, rate against RTT).
	Lines        htmlSection
	ControlPlane htmlTable
	Workloads    []htmlWorkload
	Sizing       []htmlPre
	Reference    []ReferenceRow
}

type htmlRun struct {
	Label, Dir, Scenario, Kernel, CPU, Cores, Version, Revision string
	Repetitions, Duration, Trials, Start, End, Baseline         string
	Datapaths                                                   string
	Warnings                                                    []string
}

type htmlOverview struct {
	Label string
	Radar template.HTML
	Table htmlTable
}

type htmlWorkload struct {
	Name     string
	Sections []htmlSection
	Warnings []string
}

type htmlSection struct {
	Heading string
	Note    string
	Charts  []template.HTML
	Small   []template.HTML
	Tables  []htmlTable
}

type htmlTable struct {
	Caption string
	Head    []string
	Rows    [][]string
}

type htmlPre struct {
	Label, Text string
}

// seriesID is one datapath of one run: a line or a bar in every chart.
type seriesID struct {
	run      int
	datapath string
}

type cellID struct {
	run                        int
	workload, params, datapath string
}

// index groups the runs' records by cell.
type index struct {
	runs      []Run
	runLabels []string
	baselines []string
	series    []seriesID
	names     map[seriesID]string
	colours   map[seriesID]string
	workloads []string
	keys      map[string][]string // workload → params keys in order
	params    map[string]results.Params
	cells     map[cellID][]results.Record
}

// scenarioInfo is the part of the manifest's normalized scenario the report
// shows.
type scenarioInfo struct {
	Name        string `json:"name"`
	Baseline    string `json:"baseline"`
	SizingCells string `json:"sizing_cells"`
	Repetitions int    `json:"repetitions"`
	Duration    int64  `json:"duration"`
	Warmup      int64  `json:"warmup"`
	Datapaths   []struct {
		Label string `json:"label"`
	} `json:"datapaths"`
	Workloads []struct {
		Type string `json:"type"`
	} `json:"workloads"`
}

func scenarioOf(r Run) scenarioInfo {
	var s scenarioInfo
	_ = json.Unmarshal(r.Manifest.Scenario, &s) // a manifest without a scenario shows blanks
	return s
}

func newIndex(runs []Run, baseline string) *index {
	ix := &index{runs: runs, names: map[seriesID]string{}, colours: map[seriesID]string{},
		keys: map[string][]string{}, params: map[string]results.Params{}, cells: map[cellID][]results.Record{}}
	for i, r := range runs {
		label := filepath.Base(filepath.Clean(r.Dir))
		if r.Dir == "" {
			label = "run " + strconv.Itoa(i+1)
		}
		for slices.Contains(ix.runLabels, label) {
			label += "'"
		}
		ix.runLabels = append(ix.runLabels, label)
		sc := scenarioOf(r)
		var listed []string
		for _, d := range sc.Datapaths {
			if d.Label != "" && slices.ContainsFunc(r.Records, func(rec results.Record) bool { return rec.Datapath == d.Label }) {
				listed = append(listed, d.Label)
			}
		}
		order := displayOrder(r.Records, listed)
		base := ""
		for _, cand := range []string{baseline, sc.Baseline} {
			if cand != "" && slices.Contains(order, cand) {
				base = cand
				break
			}
		}
		if base == "" && baseline == "" && len(order) > 0 {
			base = order[0]
		}
		ix.baselines = append(ix.baselines, base)
		for _, d := range order {
			id := seriesID{i, d}
			ix.series = append(ix.series, id)
			ix.names[id] = d
			if len(runs) > 1 {
				ix.names[id] = d + " (" + label + ")"
			}
			ix.colours[id] = colour(len(ix.series) - 1)
		}
		for _, rec := range withOverBaseline(r.Records, base) {
			k := rec.Params.Key()
			if _, ok := ix.keys[rec.Workload]; !ok {
				ix.workloads = append(ix.workloads, rec.Workload)
			}
			if !slices.Contains(ix.keys[rec.Workload], k) {
				ix.keys[rec.Workload] = append(ix.keys[rec.Workload], k)
				ix.params[rec.Workload+"|"+k] = rec.Params
			}
			c := cellID{i, rec.Workload, k, rec.Datapath}
			ix.cells[c] = append(ix.cells[c], rec)
		}
	}
	// Workloads in the order the first run's scenario lists them.
	var listed []string
	if len(runs) > 0 {
		for _, w := range scenarioOf(runs[0]).Workloads {
			listed = append(listed, w.Type)
		}
	}
	slices.SortStableFunc(ix.workloads, func(a, b string) int {
		ia, ib := slices.Index(listed, a), slices.Index(listed, b)
		if ia < 0 {
			ia = len(listed)
		}
		if ib < 0 {
			ib = len(listed)
		}
		return ia - ib
	})
	for wl, keys := range ix.keys {
		sort.SliceStable(keys, func(i, j int) bool {
			return paramsLess(ix.params[wl+"|"+keys[i]], ix.params[wl+"|"+keys[j]])
		})
	}
	return ix
}

// paramsLess orders parameter points by their values, numbers numerically,
// parameter names in alphabetical order.
func paramsLess(a, b results.Params) bool {
	names := sortedKeys(a)
	for _, n := range sortedKeys(b) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		x, xok := numeric(a[n])
		y, yok := numeric(b[n])
		if xok && yok {
			if x != y {
				return x < y
			}
			continue
		}
		if sa, sb := results.FormatValue(a[n]), results.FormatValue(b[n]); sa != sb {
			return sa < sb
		}
	}
	return false
}

// summary summarizes metric over the cell's successful trials that carry it.
func (ix *index) summary(c cellID, metric string) stats.Summary {
	var vals []float64
	for _, r := range ix.cells[c] {
		if r.Error != "" {
			continue
		}
		if v, ok := r.Metrics[metric]; ok {
			vals = append(vals, v)
		}
	}
	return stats.Summarize(vals)
}

// has reports whether some record of the workload carries metric.
func (ix *index) has(workload, metric string) bool {
	for c, recs := range ix.cells {
		if c.workload != workload {
			continue
		}
		for _, r := range recs {
			if _, ok := r.Metrics[metric]; ok {
				return true
			}
		}
	}
	return false
}

// rateMetric is the workload's headline rate.
func (ix *index) rateMetric(workload string) string {
	switch workload {
	case "stream":
		return results.ThroughputBPS
	case "rr":
		return results.TransactionsPerS
	case "crr":
		return results.ConnectionsPerS
	}
	for _, m := range []string{results.ThroughputBPS, results.TransactionsPerS, results.ConnectionsPerS, results.RequestsPerS} {
		if ix.has(workload, m) {
			return m
		}
	}
	return ""
}

var perCore = map[string]string{
	results.ThroughputBPS:    results.ThroughputBPSPerCore,
	results.TransactionsPerS: results.TransactionsPerSPerCore,
	results.ConnectionsPerS:  results.ConnectionsPerSPerCore,
}

func fmtFor(metric string) func(float64) string {
	return func(v float64) string { return FormatValue(metric, v) }
}

func (ix *index) legend(ids []seriesID) (names, colours []string) {
	for _, id := range ids {
		names = append(names, ix.names[id])
		colours = append(colours, ix.colours[id])
	}
	return names, colours
}

// seriesIn lists the series with records in the workload.
func (ix *index) seriesIn(workload string) []seriesID {
	var out []seriesID
	for _, id := range ix.series {
		for _, k := range ix.keys[workload] {
			if len(ix.cells[cellID{id.run, workload, k, id.datapath}]) > 0 {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// metricBars is a grouped bar chart of metric: a group per params key, a bar
// per series, with the median and its confidence interval.
func (ix *index) metricBars(title, workload, metric string, ids []seriesID, keys []string) template.HTML {
	spec := barChartSpec{title: title, yLabel: metricLabel(metric), yFmt: fmtFor(metric)}
	spec.seriesNames, spec.seriesColours = ix.legend(ids)
	for _, k := range keys {
		g := barGroup{label: shortParams(k)}
		for _, id := range ids {
			s := ix.summary(cellID{id.run, workload, k, id.datapath}, metric)
			g.bars = append(g.bars, summaryBar(ix.names[id], s))
		}
		spec.groups = append(spec.groups, g)
	}
	return barChart(spec)
}

func summaryBar(name string, s stats.Summary) bar {
	if s.N == 0 {
		return bar{series: name, missing: true}
	}
	return bar{series: name, value: s.Median, lo: s.Lo, hi: s.Hi, hasCI: s.N > 1}
}

func metricLabel(m string) string {
	switch m {
	case results.ThroughputBPS:
		return "throughput"
	case results.TransactionsPerS:
		return "transactions/s"
	case results.ConnectionsPerS:
		return "connections/s"
	case results.ThroughputBPSPerCore:
		return "throughput per core"
	case results.TransactionsPerSPerCore:
		return "transactions/s per core"
	case results.ConnectionsPerSPerCore:
		return "connections/s per core"
	case results.LatencyP50:
		return "latency p50"
	case results.LatencyP90:
		return "latency p90"
	case results.LatencyP99:
		return "latency p99"
	case results.LatencyP999:
		return "latency p99.9"
	case results.CPUCoresDatapath:
		return "datapath CPU"
	case results.CPUSecondsPerGigabyte:
		return "path CPU-seconds per GB"
	case results.CPUMicrosPerTransaction:
		return "path CPU per transaction"
	case results.CPUCoresOverBaseline:
		return "path cores over baseline"
	case results.JoulesPerGigabyte:
		return "joules per GB"
	case "datapath_setup_s":
		return "datapath setup time"
	case "idle_cpu_cores_per_site":
		return "idle CPU cores per site"
	case "idle_rss_bytes_per_site":
		return "idle RSS per site"
	}
	return m
}

// shortParams abbreviates the common parameter names of a params key.
func shortParams(k string) string {
	if k == "" {
		return "(no params)"
	}
	r := strings.NewReplacer("message_size=", "msg=", "concurrency=", "conc=", "request_size=", "req=", "response_size=", "resp=")
	return r.Replace(k)
}

func (ix *index) workload(wl string) htmlWorkload {
	out := htmlWorkload{Name: wl}
	ids := ix.seriesIn(wl)
	keys := ix.keys[wl]
	rate := ix.rateMetric(wl)

	if rate != "" {
		sec := htmlSection{Heading: metricLabel(rate), Note: "Median of the successful trials; error bars: confidence interval of the median (95% with 6 or more repetitions, [min, max] below)."}
		if chs := ix.sizeCharts(wl, rate, ids); len(chs) > 0 {
			sec.Heading += " vs message size"
			sec.Charts = chs
		} else if c := ix.metricBars(metricLabel(rate)+" · "+wl, wl, rate, ids, keys); c != "" {
			sec.Charts = append(sec.Charts, c)
		}
		if len(sec.Charts) > 0 {
			out.Sections = append(out.Sections, sec)
		}
	}

	lat := []string{results.LatencyP50, results.LatencyP90, results.LatencyP99, results.LatencyP999}
	if ix.has(wl, results.LatencyP50) {
		sec := htmlSection{Heading: "latency percentiles", Note: "Median over trials of each trial's percentile; error bars: confidence interval of the median."}
		for _, k := range keys {
			spec := barChartSpec{title: "latency · " + wl + " " + shortParams(k), yLabel: "latency", yFmt: fmtFor(results.LatencyP50)}
			spec.seriesNames, spec.seriesColours = ix.legend(ids)
			for _, m := range lat {
				g := barGroup{label: strings.TrimPrefix(metricLabel(m), "latency ")}
				for _, id := range ids {
					g.bars = append(g.bars, summaryBar(ix.names[id], ix.summary(cellID{id.run, wl, k, id.datapath}, m)))
				}
				spec.groups = append(spec.groups, g)
			}
			if c := barChart(spec); c != "" {
				sec.Charts = append(sec.Charts, c)
			}
		}
		out.Sections = append(out.Sections, sec)
	}

	if sec := ix.histogramSection(wl, ids, keys); len(sec.Charts) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	if sec := ix.seriesSection(wl, ids, keys, rate); len(sec.Small) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	if sec := ix.cpuSection(wl, ids, keys); len(sec.Charts) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	if sec := ix.efficiencySection(wl, ids, keys, rate); len(sec.Charts) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	if sec := ix.overheadSection(wl, ids, keys); len(sec.Tables) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	if sec := ix.connectionsSection(wl, ids); len(sec.Charts) > 0 {
		out.Sections = append(out.Sections, sec)
	}
	out.Warnings = ix.workloadWarnings(wl, ids, keys)
	return out
}

// sizeCharts draws rate against message size, one chart per point of the
// other parameters; nil when the workload has fewer than two message sizes.
func (ix *index) sizeCharts(wl, rate string, ids []seriesID) []template.HTML {
	const sizeParam = "message_size"
	var sizes []float64
	others := []string{}
	byOther := map[string][]string{}
	for _, k := range ix.keys[wl] {
		p := ix.params[wl+"|"+k]
		v, ok := numeric(p[sizeParam])
		if !ok || v <= 0 {
			return nil
		}
		if !slices.Contains(sizes, v) {
			sizes = append(sizes, v)
		}
		rest := results.Params{}
		for n, x := range p {
			if n != sizeParam {
				rest[n] = x
			}
		}
		ok2 := rest.Key()
		if _, seen := byOther[ok2]; !seen {
			others = append(others, ok2)
		}
		byOther[ok2] = append(byOther[ok2], k)
	}
	if len(sizes) < 2 {
		return nil
	}
	slices.Sort(sizes)
	var charts []template.HTML
	for _, o := range others {
		spec := lineChartSpec{title: metricLabel(rate) + " · " + wl + " " + o, xLabel: "message size (log scale)", yLabel: metricLabel(rate),
			xLog: true, xTicks: sizes, xFmt: sizeLabel, yFmt: fmtFor(rate)}
		for _, id := range ids {
			s := lineSeries{name: ix.names[id], colour: ix.colours[id]}
			for _, k := range byOther[o] {
				sum := ix.summary(cellID{id.run, wl, k, id.datapath}, rate)
				if sum.N == 0 {
					continue
				}
				x, _ := numeric(ix.params[wl+"|"+k][sizeParam])
				s.points = append(s.points, point{x: x, y: sum.Median, lo: sum.Lo, hi: sum.Hi, hasCI: sum.N > 1})
			}
			sort.Slice(s.points, func(i, j int) bool { return s.points[i].x < s.points[j].x })
			if len(s.points) > 0 {
				spec.series = append(spec.series, s)
			}
		}
		if c := lineChart(spec); c != "" {
			charts = append(charts, c)
		}
	}
	return charts
}

// histogramSection plots latency against percentile from each series'
// merged histograms.
func (ix *index) histogramSection(wl string, ids []seriesID, keys []string) htmlSection {
	sec := htmlSection{Heading: "latency percentile curve", Note: "Histograms of every successful trial merged per datapath; x axis 1/(1-p) on a log scale, so the tail gets room."}
	ticks := []float64{1, 2, 10, 100, 1000, 10000, 100000}
	for _, k := range keys {
		spec := lineChartSpec{title: "latency by percentile · " + wl + " " + shortParams(k), xLabel: "percentile", yLabel: "latency",
			xLog: true, xTicks: ticks, xFmt: percentileLabel, yFmt: fmtFor(results.LatencyP50)}
		for _, id := range ids {
			h := ix.mergedHistogram(cellID{id.run, wl, k, id.datapath})
			if h == nil || h.TotalCount() == 0 {
				continue
			}
			s := lineSeries{name: ix.names[id], colour: ix.colours[id], noMarkers: true}
			limit := math.Min(1e5, float64(h.TotalCount()))
			for e := 0.0; ; e += 0.1 {
				t := math.Pow(10, e)
				if t > limit*1.0001 {
					break
				}
				p := 100 * (1 - 1/t)
				s.points = append(s.points, point{x: t, y: float64(h.ValueAtQuantile(p)) / 1e9})
			}
			spec.series = append(spec.series, s)
		}
		if c := lineChart(spec); c != "" {
			sec.Charts = append(sec.Charts, c)
		}
	}
	return sec
}

func percentileLabel(t float64) string {
	p := math.Round(1e6*(1-1/t)) / 1e4
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}

// sizeLabel writes a message size exactly: "1 KiB" for 1024, "1000 B" for 1000.
func sizeLabel(v float64) string {
	n := int64(v)
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// mergedHistogram merges the histograms of the cell's successful trials; nil
// when none decodes.
func (ix *index) mergedHistogram(c cellID) *hdrhistogram.Histogram {
	var merged *hdrhistogram.Histogram
	for _, r := range ix.cells[c] {
		if r.Error != "" || r.Histogram == "" {
			continue
		}
		h, err := hdrhistogram.Decode([]byte(r.Histogram))
		if err != nil {
			continue
		}
		if merged == nil {
			merged = h
			continue
		}
		merged.Merge(h)
	}
	return merged
}

// seriesSection draws each trial's per-second series as small charts.
func (ix *index) seriesSection(wl string, ids []seriesID, keys []string, rate string) htmlSection {
	sec := htmlSection{Heading: "per-second series", Note: "One line per trial (repetition), after warmup: a stall or a slow start shows as a dip."}
	for _, k := range keys {
		for _, id := range ids {
			recs := ix.cells[cellID{id.run, wl, k, id.datapath}]
			metric := rate
			var lines []lineSeries
			for i, r := range recs {
				s, ok := r.Series[metric]
				if !ok {
					for _, name := range sortedKeys(r.Series) {
						metric, s, ok = name, r.Series[name], true
						break
					}
				}
				if !ok || len(s.Values) == 0 {
					continue
				}
				ls := lineSeries{name: "rep " + strconv.Itoa(r.Rep), colour: colour(i)}
				for j, v := range s.Values {
					ls.points = append(ls.points, point{x: float64(j), y: v})
				}
				lines = append(lines, ls)
			}
			if c := sparkline(ix.names[id]+" · "+shortParams(k), lines, fmtFor(metric)); c != "" {
				sec.Small = append(sec.Small, c)
			}
		}
	}
	return sec
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cpuSection stacks CPU per component: generator, each cpu_cores{NAME}
// component, softirq.
func (ix *index) cpuSection(wl string, ids []seriesID, keys []string) htmlSection {
	sec := htmlSection{Heading: "CPU per component", Note: "Median cores (CPU-seconds per second) of each component over the trials, stacked: load generator, datapath processes (cpu_cores{name}), machine-wide softirq."}
	for _, k := range keys {
		var segNames []string
		for _, id := range ids {
			for _, r := range ix.cells[cellID{id.run, wl, k, id.datapath}] {
				for m := range r.Metrics {
					if name, ok := componentOf(m); ok && !slices.Contains(segNames, name) {
						segNames = append(segNames, name)
					}
				}
			}
		}
		sort.Strings(segNames)
		segNames = append(append([]string{"generator"}, segNames...), "softirq")
		metricOf := func(seg string) string {
			switch seg {
			case "generator":
				return results.CPUCoresGenerator
			case "softirq":
				return results.CPUCoresSoftirq
			}
			return results.For(results.CPUCores, seg)
		}
		spec := barChartSpec{title: "CPU · " + wl + " " + shortParams(k), yLabel: "cores", yFmt: fmtFor("cores"), stacked: true}
		for i, s := range segNames {
			spec.seriesNames = append(spec.seriesNames, s)
			spec.seriesColours = append(spec.seriesColours, colour(i+2))
		}
		drawn := false
		for _, id := range ids {
			b := bar{series: ix.names[id]}
			for _, s := range segNames {
				if sum := ix.summary(cellID{id.run, wl, k, id.datapath}, metricOf(s)); sum.N > 0 {
					b.segments = append(b.segments, segment{name: s, value: sum.Median})
					drawn = true
				}
			}
			b.missing = len(b.segments) == 0
			spec.groups = append(spec.groups, barGroup{label: ix.names[id], bars: []bar{b}})
		}
		if drawn {
			sec.Charts = append(sec.Charts, barChart(spec))
		}
	}
	return sec
}

// componentOf returns NAME of a "cpu_cores{NAME}" metric.
func componentOf(m string) (string, bool) {
	rest, ok := strings.CutPrefix(m, results.CPUCores+"{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}")
}

func (ix *index) efficiencySection(wl string, ids []seriesID, keys []string, rate string) htmlSection {
	sec := htmlSection{Heading: "efficiency", Note: "CPU on the whole path: the machine's busy CPU less foreign CPU (cpu_cores_path), load generator and kernel included, per core, per gigabyte or per transaction; at paced points, the cores over the baseline's median at the same rate."}
	if pc, ok := perCore[rate]; ok && ix.has(wl, pc) {
		sec.Charts = append(sec.Charts, ix.metricBars(metricLabel(pc)+" · "+wl, wl, pc, ids, keys))
	}
	for _, m := range []string{results.CPUSecondsPerGigabyte, results.CPUMicrosPerTransaction, results.CPUCoresOverBaseline} {
		if ix.has(wl, m) {
			sec.Charts = append(sec.Charts, ix.metricBars(metricLabel(m)+" · "+wl, wl, m, ids, keys))
		}
	}
	if ix.has(wl, results.JoulesPerGigabyte) {
		estimated := false
		spec := barChartSpec{title: "joules per gigabyte · " + wl, yLabel: "J/GB", yFmt: fmtFor("joules")}
		spec.seriesNames, spec.seriesColours = ix.legend(ids)
		for _, k := range keys {
			g := barGroup{label: shortParams(k)}
			for _, id := range ids {
				c := cellID{id.run, wl, k, id.datapath}
				b := summaryBar(ix.names[id], ix.summary(c, results.JoulesPerGigabyte))
				if ix.summary(c, results.EnergyEstimated).Max == 1 {
					b.note, estimated = "est.", true
				}
				g.bars = append(g.bars, b)
			}
			spec.groups = append(spec.groups, g)
		}
		if estimated {
			spec.title += " (estimated)"
			sec.Note += " Bars marked est. are estimated from CPU time by the scenario's energy model (no RAPL), not measured."
		}
		if c := barChart(spec); c != "" {
			sec.Charts = append(sec.Charts, c)
		}
	}
	return sec
}

// headline lists the workload's headline metrics present in its records.
func (ix *index) headline(wl string) []string {
	var ms []string
	if h, ok := headlineMetrics[wl]; ok {
		ms = slices.Clone(h)
	} else {
		ms = slices.Clone(fallbackMetrics)
	}
	for _, m := range []string{results.CPUCoresDatapath, perCore[ix.rateMetric(wl)], results.CPUSecondsPerGigabyte,
		results.CPUMicrosPerTransaction, results.JoulesPerGigabyte} {
		if m != "" && !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return slices.DeleteFunc(ms, func(m string) bool { return !ix.has(wl, m) })
}

// overheadSection gives, per run, each datapath's change of the median
// against the baseline's, in percent.
func (ix *index) overheadSection(wl string, ids []seriesID, keys []string) htmlSection {
	sec := htmlSection{Heading: "overhead vs baseline", Note: "Change of the median against the baseline datapath's median, in percent: (x − baseline) / baseline."}
	metrics := ix.headline(wl)
	for ri := range ix.runs {
		base := ix.baselines[ri]
		if base == "" {
			continue
		}
		var others []seriesID
		for _, id := range ids {
			if id.run == ri && id.datapath != base {
				others = append(others, id)
			}
		}
		if len(others) == 0 {
			continue
		}
		t := htmlTable{Caption: "against " + base, Head: []string{"params", "metric"}}
		if len(ix.runs) > 1 {
			t.Caption += " in " + ix.runLabels[ri]
		}
		spec := barChartSpec{title: metricLabel(ix.rateMetric(wl)) + " change vs " + base + " · " + wl, yLabel: "change", yFmt: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "%" }}
		spec.seriesNames, spec.seriesColours = ix.legend(others)
		for _, id := range others {
			t.Head = append(t.Head, id.datapath)
		}
		for _, k := range keys {
			for _, m := range metrics {
				bs := ix.summary(cellID{ri, wl, k, base}, m)
				row := []string{shortParams(k), metricLabel(m)}
				g := barGroup{label: shortParams(k)}
				for _, id := range others {
					s := ix.summary(cellID{ri, wl, k, id.datapath}, m)
					if bs.N == 0 || s.N == 0 || bs.Median == 0 {
						row = append(row, "–")
						g.bars = append(g.bars, bar{series: ix.names[id], missing: true})
						continue
					}
					ch := stats.ChangePct(bs.Median, s.Median)
					row = append(row, fmt.Sprintf("%+.1f%%", ch))
					g.bars = append(g.bars, bar{series: ix.names[id], value: ch})
				}
				t.Rows = append(t.Rows, row)
				if m == ix.rateMetric(wl) {
					spec.groups = append(spec.groups, g)
				}
			}
		}
		if c := barChart(spec); c != "" {
			sec.Charts = append(sec.Charts, c)
		}
		sec.Tables = append(sec.Tables, t)
	}
	return sec
}

// lowerIsBetter reports whether a smaller value of metric is better.
func lowerIsBetter(m string) bool {
	return strings.HasPrefix(m, "latency_") || strings.HasPrefix(m, "cpu_cores") || strings.HasPrefix(m, "rss_") ||
		m == results.JoulesPerGigabyte || m == results.EnergyJoules || m == results.Retransmits ||
		slices.Contains(ControlPlaneMetrics, m)
}

// overviewRule is printed beside the normalized overview.
const overviewRule = "Each axis is one headline metric of one workload. At every parameter point the datapaths' medians are scaled to 0–1 " +
	"with 1 for the best datapath: x / best when higher is better (rates, rate per core), best / x when lower is better " +
	"(latency, CPU, joules per GB). An axis is the mean of those scores over the workload's parameter points where the datapath has a value; " +
	"“–” means no value. Scores compare datapaths of the same run only."

// overview scales every headline metric of run ri to 0–1 per datapath.
func (ix *index) overview(ri int) *htmlOverview {
	var ids []seriesID
	for _, id := range ix.series {
		if id.run == ri {
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	var axes []string
	var scores [][]float64 // per axis, per datapath
	for _, wl := range ix.workloads {
		for _, m := range ix.headline(wl) {
			sum, cnt := make([]float64, len(ids)), make([]int, len(ids))
			for _, k := range ix.keys[wl] {
				med := make([]float64, len(ids))
				best := math.NaN()
				for i, id := range ids {
					med[i] = math.NaN()
					if s := ix.summary(cellID{ri, wl, k, id.datapath}, m); s.N > 0 {
						med[i] = s.Median
						if math.IsNaN(best) || (lowerIsBetter(m) && s.Median < best) || (!lowerIsBetter(m) && s.Median > best) {
							best = s.Median
						}
					}
				}
				for i, v := range med {
					if math.IsNaN(v) {
						continue
					}
					var sc float64
					switch {
					case lowerIsBetter(m) && v > 0:
						sc = best / v
					case lowerIsBetter(m):
						sc = 1
					case best > 0:
						sc = v / best
					default:
						sc = 1
					}
					sum[i] += math.Max(0, math.Min(1, sc))
					cnt[i]++
				}
			}
			col := make([]float64, len(ids))
			anyVal := false
			for i := range ids {
				col[i] = math.NaN()
				if cnt[i] > 0 {
					col[i], anyVal = sum[i]/float64(cnt[i]), true
				}
			}
			if anyVal {
				axes = append(axes, wl+" "+shortMetric(m))
				scores = append(scores, col)
			}
		}
	}
	if len(axes) == 0 {
		return nil
	}
	ov := &htmlOverview{Label: ix.runLabels[ri]}
	ov.Table.Head = append([]string{"datapath"}, axes...)
	spec := radarSpec{title: "normalized overview · " + ix.runLabels[ri], axes: axes}
	for i, id := range ids {
		row := []string{id.datapath}
		rs := radarSeries{name: ix.names[id], colour: ix.colours[id]}
		for a := range axes {
			v := scores[a][i]
			rs.values = append(rs.values, v)
			if math.IsNaN(v) {
				row = append(row, "–")
			} else {
				row = append(row, strconv.FormatFloat(v, 'f', 2, 64))
			}
		}
		spec.series = append(spec.series, rs)
		ov.Table.Rows = append(ov.Table.Rows, row)
	}
	ov.Radar = radar(spec)
	return ov
}

func shortMetric(m string) string {
	switch m {
	case results.ThroughputBPS:
		return "throughput"
	case results.TransactionsPerS:
		return "tx/s"
	case results.ConnectionsPerS:
		return "conn/s"
	case results.LatencyP50:
		return "p50"
	case results.LatencyP99:
		return "p99"
	case results.CPUCoresDatapath:
		return "CPU"
	case results.ThroughputBPSPerCore, results.TransactionsPerSPerCore, results.ConnectionsPerSPerCore:
		return "per core"
	case results.CPUSecondsPerGigabyte:
		return "CPU s/GB"
	case results.CPUMicrosPerTransaction:
		return "CPU/tx"
	case results.JoulesPerGigabyte:
		return "J/GB"
	}
	return m
}

// workloadWarnings lists high variance, failed trials and missing probes.
func (ix *index) workloadWarnings(wl string, ids []seriesID, keys []string) []string {
	var out []string
	metrics := ix.headline(wl)
	for _, k := range keys {
		for _, id := range ids {
			c := cellID{id.run, wl, k, id.datapath}
			recs := ix.cells[c]
			where := ix.names[id] + " " + shortParams(k)
			failed, first := 0, ""
			missing := map[string]string{}
			for _, r := range recs {
				if r.Error != "" {
					if failed == 0 {
						first = r.Error
					}
					failed++
				}
				for m, why := range r.Missing {
					missing[m] = why
				}
			}
			if failed > 0 {
				out = append(out, fmt.Sprintf("%s: %d of %d trials failed: %s", where, failed, len(recs), first))
			}
			for _, m := range sortedKeys(missing) {
				if m == results.EnergyRAPL {
					continue // stated once per run
				}
				out = append(out, fmt.Sprintf("%s: %s not measured: %s", where, m, missing[m]))
			}
			for _, m := range metrics {
				s := ix.summary(c, m)
				if s.N > 0 && s.Mean != 0 && s.Stddev/math.Abs(s.Mean) > stats.HighVariance {
					out = append(out, fmt.Sprintf("%s: %s varies: cv=%.0f%% (above %.0f%%)", where, metricLabel(m), 100*s.Stddev/math.Abs(s.Mean), 100*stats.HighVariance))
				}
			}
		}
	}
	return out
}

func (ix *index) runInfo(ri int) htmlRun {
	r := ix.runs[ri]
	sc := scenarioOf(r)
	m := r.Manifest
	info := htmlRun{Label: ix.runLabels[ri], Dir: r.Dir, Scenario: sc.Name, Kernel: m.Host.Kernel, CPU: m.Host.CPUModel,
		Version: m.Version, Revision: m.Revision, Baseline: ix.baselines[ri]}
	if m.Host.Cores > 0 {
		info.Cores = strconv.Itoa(m.Host.Cores)
	}
	if sc.Name == "" {
		info.Scenario = m.ScenarioFile
	}
	var dps []string
	for _, id := range ix.series {
		if id.run == ri {
			dps = append(dps, id.datapath)
		}
	}
	info.Datapaths = strings.Join(dps, ", ")
	maxRep := 0
	failed, estimated := 0, false
	missing := map[string]int{}
	for _, rec := range r.Records {
		maxRep = max(maxRep, rec.Rep+1)
		if rec.Error != "" {
			failed++
		}
		for k, why := range rec.Missing {
			missing[k+": "+why]++
		}
		if rec.Metrics[results.EnergyEstimated] == 1 {
			estimated = true
		}
	}
	reps := sc.Repetitions
	if reps == 0 {
		reps = maxRep
	}
	info.Repetitions = strconv.Itoa(reps)
	if sc.Duration > 0 {
		info.Duration = time.Duration(sc.Duration).String()
		if sc.Warmup > 0 {
			info.Duration += " measured, after " + time.Duration(sc.Warmup).String() + " warmup"
		}
	}
	info.Trials = fmt.Sprintf("%d records", len(r.Records))
	if m.Trials > 0 {
		info.Trials += fmt.Sprintf(" of %d planned", m.Trials)
	}
	if !m.Start.IsZero() {
		info.Start = m.Start.UTC().Format(time.RFC3339)
	}
	if !m.End.IsZero() {
		info.End = m.End.UTC().Format(time.RFC3339)
	}
	if m.Interrupted {
		info.Warnings = append(info.Warnings, "the run was interrupted before its plan was done")
	}
	if m.Trials > 0 && len(r.Records) < m.Trials {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d of %d planned trials have no record", m.Trials-len(r.Records), m.Trials))
	}
	if reps < 3 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d repetitions: fewer than 3, medians and intervals are weak", reps))
	}
	if reps < 6 && reps > 0 {
		conf := stats.Summarize(make([]float64, reps)).Confidence
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d repetitions: error bars span [min, max], which covers the median with %.0f%% confidence; 6 or more repetitions give 95%%", reps, conf*100))
	}
	if failed > 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d trials failed; they are left out of every figure", failed))
	}
	for _, k := range sortedKeys(missing) {
		info.Warnings = append(info.Warnings, fmt.Sprintf("not measured in %d trials: %s", missing[k], k))
	}
	if estimated {
		info.Warnings = append(info.Warnings, "energy is estimated from CPU time (energy_estimated = 1), not measured")
	}
	info.Warnings = append(info.Warnings, trialWarnings(r.Records)...)
	return info
}

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"overviewRule": func() string { return overviewRule },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
dl.run{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:14px}dl.run dt{font-weight:600}dl.run dd{margin:0}
.warn{color:#8a4b00;background:#fff6e5;border-left:4px solid #e69f00;padding:6px 10px;font-size:13px}
.warn li{margin:2px 0}.note{color:#555;font-size:13px}.charts{display:flex;flex-wrap:wrap;gap:16px}
.small{display:flex;flex-wrap:wrap;gap:6px}pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto}
svg.chart{background:#fff;border:1px solid #eee}
svg .t{font-size:13px;font-weight:600}svg .st{font-size:10px}svg .tick{font-size:10px;fill:#444}svg .al{font-size:11px;fill:#222}
svg .lg{font-size:11px}svg .note{font-size:9px;fill:#8a4b00}svg .grid{stroke:#e6e6e6;stroke-width:1}svg .axis{stroke:#444;stroke-width:1}
.ref{font-size:12px}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<h2 id="runs">What was run</h2>
{{range .Runs}}<h3>{{.Label}}</h3>
<dl class="run">
<dt>run directory</dt><dd>{{.Dir}}</dd>
<dt>scenario</dt><dd>{{.Scenario}}</dd>
<dt>machine</dt><dd>kernel {{.Kernel}}, CPU {{.CPU}}, {{.Cores}} cores</dd>
<dt>spanperf</dt><dd>{{.Version}} (revision {{.Revision}})</dd>
<dt>repetitions</dt><dd>{{.Repetitions}}</dd>
<dt>duration</dt><dd>{{.Duration}}</dd>
<dt>trials</dt><dd>{{.Trials}}</dd>
<dt>time</dt><dd>{{.Start}} – {{.End}}</dd>
<dt>datapaths</dt><dd>{{.Datapaths}}</dd>
<dt>baseline</dt><dd>{{.Baseline}}</dd>
</dl>
{{if .Warnings}}<ul class="warn">{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}
{{if .Overviews}}<h2 id="overview">Normalized overview</h2>
<p class="note">{{overviewRule}}</p>
{{range .Overviews}}<div class="charts">{{.Radar}}
<table><caption>{{.Label}}: scores (1 = best)</caption><tr>{{range .Table.Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Table.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{end}}{{end}}
{{if .Lines.Charts}}<h2 id="lines">{{.Lines.Heading}}</h2>
<p class="note">{{.Lines.Note}}</p>
<div class="charts">{{range .Lines.Charts}}{{.}}{{end}}</div>{{end}}
{{if .ControlPlane.Rows}}<h2 id="control-plane">Control-plane timings</h2>
<p class="note">{{.ControlPlane.Caption}}</p>
<table><tr>{{range .ControlPlane.Head}}<th>{{.}}</th>{{end}}</tr>
{{range .ControlPlane.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{range .Workloads}}<h2 id="workload-{{.Name}}">Workload {{.Name}}</h2>
{{if .Warnings}}<ul class="warn">{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Sections}}<h3>{{.Heading}}</h3>
{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{if .Charts}}<div class="charts">{{range .Charts}}{{.}}{{end}}</div>{{end}}
{{if .Small}}<div class="small">{{range .Small}}{{.}}{{end}}</div>{{end}}
{{range .Tables}}<table><caption>{{.Caption}}</caption><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{end}}{{end}}
{{if .Sizing}}<h2 id="sizing">Sizing</h2>
{{range .Sizing}}<h3>{{.Label}}</h3><pre>{{.Text}}</pre>{{end}}{{end}}
{{if .Reference}}<h2 id="reference">Reference figures</h2>
<p class="note">Published or earlier figures, from a different testbed: compare shapes and ratios, not absolute values.</p>
<table class="ref"><tr><th>source</th><th>datapath</th><th>workload</th><th>message size</th><th>threads</th><th>metric</th><th>value</th><th>unit</th></tr>
{{range .Reference}}<tr><td>{{.Source}}</td><td>{{.Datapath}}</td><td>{{.Workload}}</td><td>{{if .MessageSize}}{{.MessageSize}}{{end}}</td><td>{{if .Threads}}{{.Threads}}{{end}}</td><td>{{.Metric}}</td><td>{{.Value}}</td><td>{{.Unit}}</td></tr>
{{end}}</table>{{end}}
</body>
</html>
`))
