package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// Alpha is the significance level of Compare's Mann-Whitney U tests.
const Alpha = 0.05

// MinCompareReps is the fewest successful trials on each side Compare
// tests; with fewer it says so instead of giving a verdict.
const MinCompareReps = 3

// Direction says which way a metric improves.
type Direction int

// Directions of metrics.
const (
	// Neutral metrics (counts, windows, flags) get no better or worse.
	Neutral Direction = iota
	// HigherIsBetter: rates, throughput, per-core efficiency.
	HigherIsBetter
	// LowerIsBetter: latency, CPU, memory, energy.
	LowerIsBetter
)

// MetricDirection says which way a metric, named as in package results,
// improves: higher for _bps, _per_s and _per_core; lower for latency_…,
// rss_…, joules_per_gigabyte, cpu_seconds_per_gigabyte and
// cpu_us_per_transaction; neutral for everything else (other cpu_… and
// cgroup_cpu_… figures, energy_joules). A component suffix
// ("{name}") is ignored.
func MetricDirection(metric string) Direction {
	if i := strings.IndexByte(metric, '{'); i >= 0 {
		metric = metric[:i]
	}
	switch {
	case strings.HasSuffix(metric, "_per_core"), strings.HasSuffix(metric, "_bps"), strings.HasSuffix(metric, "_per_s"):
		return HigherIsBetter
	case metric == results.CPUSecondsPerGigabyte, metric == results.CPUMicrosPerTransaction:
		// The path's CPU per unit of work: efficiency, unlike cpu_cores….
		return LowerIsBetter
	case strings.HasPrefix(metric, "cpu_"), strings.HasPrefix(metric, "cgroup_cpu_"), metric == results.EnergyJoules:
		// CPU and energy grow with the load carried: a run that got faster
		// spends more. Their efficiency (_per_core, joules per gigabyte)
		// is what has a direction.
		return Neutral
	case strings.HasPrefix(metric, "latency_"), strings.HasPrefix(metric, "rss_"), metric == results.JoulesPerGigabyte:
		return LowerIsBetter
	}
	return Neutral
}

// Verdict is the outcome of comparing one metric between two runs.
type Verdict string

// Verdicts: Better and Worse are significant changes in the metric's good
// or bad direction; NoChange has p ≥ Alpha; Changed is significant for a
// metric without a direction; TooFewReps means the samples are too small
// for the test to reach Alpha; NotComparable means the test could not run
// (e.g. NaN values).
const (
	Better        Verdict = "better"
	Worse         Verdict = "worse"
	NoChange      Verdict = "no significant change"
	Changed       Verdict = "changed"
	TooFewReps    Verdict = "too few repetitions"
	NotComparable Verdict = "not comparable"
)

// CompareOptions controls Compare. The zero value fails on any significant
// worsening.
type CompareOptions struct {
	// ThresholdPct is the change in percent a significant worsening must
	// exceed to count as a regression; 0 counts every one.
	ThresholdPct float64
}

// Change is one metric of one datapath × workload × params point in both
// runs.
type Change struct {
	// Datapath, Workload, Params (params.Key()) and Metric name what was
	// compared.
	Datapath, Workload, Params, Metric string
	// OldN, NewN are the numbers of successful trials with the metric.
	OldN, NewN int
	// Old and New are the medians.
	Old, New float64
	// Pct is the change of the median in percent of Old; NaN when Old is 0.
	Pct float64
	// P is the two-sided Mann-Whitney U p-value; NaN when not tested.
	P float64
	// Verdict is the outcome; Note explains TooFewReps and NotComparable.
	Verdict Verdict
	Note    string
	// Regression is set when Verdict is Worse and |Pct| exceeds the
	// threshold.
	Regression bool
}

// Compare compares every metric of every datapath × workload × params point
// present in both old and new (over successful trials), in old's order of
// points and metric-name order. A metric is tested with the Mann-Whitney U
// test when both sides have at least MinCompareReps values and those sample
// sizes can reach a p-value below Alpha; otherwise its verdict is
// TooFewReps. With p < Alpha the verdict is Better or Worse by the
// metric's direction (Changed for neutral metrics), else NoChange.
func Compare(old, new Run, opts CompareOptions) []Change {
	type point struct{ d, w, p string }
	group := func(run Run) (map[point][]results.Record, []point) {
		m := map[point][]results.Record{}
		var order []point
		for _, r := range run.Records {
			k := point{r.Datapath, r.Workload, r.Params.Key()}
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = append(m[k], r)
		}
		return m, order
	}
	oldG, order := group(old)
	newG, _ := group(new)
	// Benchstat style: points of one workload × params together, datapaths
	// in order of first appearance.
	var wps, dps []string
	for _, k := range order {
		if wp := k.w + "\x00" + k.p; !slices.Contains(wps, wp) {
			wps = append(wps, wp)
		}
		if !slices.Contains(dps, k.d) {
			dps = append(dps, k.d)
		}
	}
	slices.SortStableFunc(order, func(a, b point) int {
		if c := slices.Index(wps, a.w+"\x00"+a.p) - slices.Index(wps, b.w+"\x00"+b.p); c != 0 {
			return c
		}
		return slices.Index(dps, a.d) - slices.Index(dps, b.d)
	})
	var out []Change
	for _, k := range order {
		nrecs, ok := newG[k]
		if !ok {
			continue
		}
		orecs := oldG[k]
		var names []string
		for _, r := range orecs {
			if r.Error != "" {
				continue
			}
			for m := range r.Metrics {
				if !slices.Contains(names, m) {
					names = append(names, m)
				}
			}
		}
		sort.Strings(names)
		for _, m := range names {
			a, b := values(orecs, m), values(nrecs, m)
			if len(b) == 0 {
				continue
			}
			out = append(out, compareMetric(k.d, k.w, k.p, m, a, b, opts))
		}
	}
	return out
}

func compareMetric(d, w, p, m string, a, b []float64, opts CompareOptions) Change {
	sa, sb := stats.Summarize(a), stats.Summarize(b)
	c := Change{Datapath: d, Workload: w, Params: p, Metric: m, OldN: sa.N, NewN: sb.N,
		Old: sa.Median, New: sb.Median, Pct: stats.ChangePct(sa.Median, sb.Median), P: math.NaN()}
	if sa.N < MinCompareReps || sb.N < MinCompareReps {
		c.Verdict, c.Note = TooFewReps, fmt.Sprintf("n=%d+%d, need %d on each side", sa.N, sb.N, MinCompareReps)
		return c
	}
	if minP := minimumP(sa.N, sb.N); minP >= Alpha {
		c.Verdict, c.Note = TooFewReps, fmt.Sprintf("n=%d+%d: p cannot go below %.2g, need p < %g", sa.N, sb.N, minP, Alpha)
		return c
	}
	pv, err := stats.MannWhitneyU(a, b)
	if err != nil {
		c.Verdict, c.Note = NotComparable, err.Error()
		return c
	}
	c.P = pv
	switch {
	case pv >= Alpha:
		c.Verdict = NoChange
	case MetricDirection(m) == Neutral || sb.Median == sa.Median:
		c.Verdict = Changed
	case (sb.Median > sa.Median) == (MetricDirection(m) == HigherIsBetter):
		c.Verdict = Better
	default:
		c.Verdict = Worse
	}
	c.Regression = c.Verdict == Worse && !math.IsNaN(c.Pct) && math.Abs(c.Pct) > opts.ThresholdPct
	return c
}

// minimumP is the smallest two-sided p-value the Mann-Whitney U test can
// give for samples of sizes n1 and n2 without ties: 2/C(n1+n2, n1).
func minimumP(n1, n2 int) float64 {
	lg := func(x int) float64 {
		v, _ := math.Lgamma(float64(x) + 1)
		return v
	}
	return math.Min(1, 2/math.Exp(lg(n1+n2)-lg(n1)-lg(n2)))
}

// Regressed reports whether any change is a regression.
func Regressed(changes []Change) bool {
	return slices.ContainsFunc(changes, func(c Change) bool { return c.Regression })
}

// WriteComparison writes changes as plain-text tables, benchstat style: one
// per workload × params, a row per datapath × metric with the old and new
// medians (FormatValue), the change, the p-value with the sample sizes and
// the verdict; regressions are marked "!". A last line counts the
// verdicts. oldLabel and newLabel head the median columns.
func WriteComparison(w io.Writer, oldLabel, newLabel string, changes []Change, opts CompareOptions) error {
	var buf bytes.Buffer
	var footnotes []string
	if len(changes) == 0 {
		buf.WriteString("no datapath × workload × params point is in both runs\n")
	}
	for i := 0; i < len(changes); {
		j := i
		for j < len(changes) && changes[j].Workload == changes[i].Workload && changes[j].Params == changes[i].Params {
			j++
		}
		if i > 0 {
			buf.WriteByte('\n')
		}
		params := changes[i].Params
		if params == "" {
			params = "(none)"
		}
		fmt.Fprintf(&buf, "%s %s\n", changes[i].Workload, params)
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "datapath\tmetric\t%s\t%s\tchange\tp\tverdict\n", oldLabel, newLabel)
		for _, c := range changes[i:j] {
			pct := deltaText(row{}, cell{delta: c.Pct})
			p := fmt.Sprintf("(n=%d+%d)", c.OldN, c.NewN)
			if !math.IsNaN(c.P) {
				p = fmt.Sprintf("p=%.3f n=%d+%d", c.P, c.OldN, c.NewN)
			}
			v := string(c.Verdict)
			if c.Note != "" {
				if !slices.Contains(footnotes, c.Note) {
					footnotes = append(footnotes, c.Note)
				}
				v += " " + markerSymbol(slices.Index(footnotes, c.Note))
			}
			if c.Regression {
				v = "! " + v
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Datapath, c.Metric,
				FormatValue(c.Metric, c.Old), FormatValue(c.Metric, c.New), pct, p, v)
		}
		tw.Flush()
		i = j
	}
	counts := map[Verdict]int{}
	regressions := 0
	for _, c := range changes {
		counts[c.Verdict]++
		if c.Regression {
			regressions++
		}
	}
	var parts []string
	for _, v := range []Verdict{Better, Worse, Changed, NoChange, TooFewReps, NotComparable} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	buf.WriteByte('\n')
	for i, f := range footnotes {
		fmt.Fprintf(&buf, "%s %s\n", markerSymbol(i), f)
	}
	if len(parts) > 0 {
		fmt.Fprintf(&buf, "%s; alpha %g\n", strings.Join(parts, ", "), Alpha)
	}
	fmt.Fprintf(&buf, "%d regressions (significantly worse by more than %g%%)\n", regressions, opts.ThresholdPct)
	if _, err := w.Write(trimLines(buf.Bytes())); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}
