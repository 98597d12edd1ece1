package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// Alpha is the significance level of Compare's Mann-Whitney U tests, applied
// to p-values adjusted for multiple comparisons (stats.AdjustBH).
const Alpha = 0.05

// MinCompareReps is the fewest successful trials on each side Compare
// tests; with fewer it says so instead of giving a verdict.
const MinCompareReps = 3

// TrialsMetric is the name Compare gives the row of a point's trials: one
// that vanished from the new run, or whose share of failed trials rose.
const TrialsMetric = "trials"

// Direction says which way a metric improves.
type Direction int

// Directions of metrics.
const (
	// Neutral metrics (counts, windows, flags) get no better or worse.
	Neutral Direction = iota
	// HigherIsBetter: rates, throughput, per-core efficiency, sustained.
	HigherIsBetter
	// LowerIsBetter: latency, memory, energy per gigabyte, CPU per unit of
	// work, errors, timeouts, retransmits.
	LowerIsBetter
)

// MetricDirection says which way a metric, named as in package results,
// improves: higher for _bps, _per_s, _per_core and sustained; lower for
// latency_…, rss_…, joules_per_gigabyte, cpu_seconds_per_gigabyte,
// cpu_us_per_transaction, errors, timeouts, retransmits, retransmit_rate,
// the connections workload's failures and connect latencies, the setup,
// tunnel-up and teardown times, discovery's times and failover's outage,
// recovery and failed transactions; neutral for
// everything else, among them raw CPU and energy, and the offered rate of a
// paced workload (target_rate, offered_per_s), which is an input. A
// component suffix ("{name}") is ignored.
func MetricDirection(metric string) Direction {
	if i := strings.IndexByte(metric, '{'); i >= 0 {
		metric = metric[:i]
	}
	switch metric {
	case results.Sustained, results.JainFairness:
		return HigherIsBetter
	case results.Errors, results.Timeouts, results.Retransmits, results.RetransmitRate,
		results.ConnectFailures, results.KeepaliveFailures, results.ConnectLatencyP50, results.ConnectLatencyP99,
		results.SetupSeconds, results.TunnelUpSeconds, results.TeardownSeconds, results.CPUSecondsPerGigabyte, results.CPUMicrosPerTransaction,
		results.DiscoverySeconds, results.ProcessReadySeconds, results.RouteInstalledSeconds, results.FirstConnectSeconds, results.FirstResponseSeconds,
		results.OutageSeconds, results.RecoverySeconds, results.FailedTransactions:
		return LowerIsBetter
	case results.TargetRate, results.OfferedPerS:
		return Neutral
	}
	switch {
	case strings.HasSuffix(metric, "_per_core"), strings.HasSuffix(metric, "_bps"), strings.HasSuffix(metric, "_per_s"):
		return HigherIsBetter
	case metric == results.CPUSecondsPerGigabyte, metric == results.CPUMicrosPerTransaction:
		// The path's CPU per unit of work: efficiency, unlike cpu_cores….
		return LowerIsBetter
	case strings.HasPrefix(metric, "cpu_"), strings.HasPrefix(metric, "cgroup_cpu_"), metric == results.EnergyJoules:
		// CPU and energy grow with the load carried: a run that got faster
		// spends more. Their efficiency (_per_core, joules per gigabyte,
		// CPU per unit of work) is what has a direction.
		return Neutral
	case metric == results.LatencySamples:
		return Neutral // a count, not a latency
	case metric == results.Late:
		return LowerIsBetter // requests a paced run could not send in time
	case strings.HasPrefix(metric, "latency_"), strings.HasPrefix(metric, "rss_"), metric == results.JoulesPerGigabyte:
		return LowerIsBetter
	}
	return Neutral
}

// failureKind says whether metric marks a trial as partly failed (errors or
// timeouts above 0, sustained 0), and how to name such trials.
func failureKind(metric string) (failed func(float64) bool, what string) {
	switch metric {
	case results.Errors:
		return func(v float64) bool { return v > 0 }, "trials with errors"
	case results.Timeouts:
		return func(v float64) bool { return v > 0 }, "trials with timeouts"
	case results.Sustained:
		return func(v float64) bool { return v < 1 }, "trials not sustained"
	}
	return nil, ""
}

// Verdict is the outcome of comparing one metric between two runs.
type Verdict string

// Verdicts: Better and Worse are significant changes in the metric's good
// or bad direction; NoChange has p ≥ Alpha; Changed is significant for a
// metric without a direction; TooFewReps means the samples are too small
// for the test to reach Alpha; NotComparable means the test could not run
// (e.g. NaN values). LikelyWorse: the test could not decide, but every new
// value is worse than every old one by more than the threshold. Vanished: a
// point or metric had successful trials in the old run and has none in the
// new. MoreFailures: a larger share of the new trials failed, or had errors
// or timeouts, or did not sustain their offered rate.
const (
	Better        Verdict = "better"
	Worse         Verdict = "worse"
	NoChange      Verdict = "no significant change"
	Changed       Verdict = "changed"
	TooFewReps    Verdict = "too few repetitions"
	NotComparable Verdict = "not comparable"
	LikelyWorse   Verdict = "likely worse, too few repetitions to test"
	Vanished      Verdict = "vanished"
	MoreFailures  Verdict = "more failures"
)

// CompareOptions controls Compare. The zero value fails on any significant
// worsening.
type CompareOptions struct {
	// ThresholdPct is the change in percent a worsening must exceed to count
	// as a regression (or, untested, as likely worse); 0 counts every one.
	ThresholdPct float64
}

// Change is one metric of one datapath × workload × params point in both
// runs.
type Change struct {
	// Datapath, Workload, Params (params.Key()) and Metric name what was
	// compared; Metric is TrialsMetric for the row of a point's trials.
	Datapath, Workload, Params, Metric string
	// OldN, NewN are the numbers of successful trials with the metric.
	OldN, NewN int
	// Old and New are the medians; New is NaN when the metric vanished.
	Old, New float64
	// OldText and NewText, when set, are shown instead of the medians
	// (counts of trials).
	OldText, NewText string
	// Pct is the change of the median in percent of Old; NaN when Old is 0.
	Pct float64
	// P is the two-sided Mann-Whitney U p-value adjusted for the number of
	// tests (stats.AdjustBH over Comparison.Tests or NeutralTests); RawP is
	// before adjustment. Both are NaN when not tested.
	P, RawP float64
	// Verdict is the outcome; Note explains TooFewReps, NotComparable,
	// LikelyWorse, Vanished and MoreFailures.
	Verdict Verdict
	Note    string
	// Regression is set when Verdict is Worse by more than the threshold,
	// Vanished for a point or a metric with a direction, or MoreFailures.
	Regression bool
	// Inconclusive is set when Verdict is LikelyWorse.
	Inconclusive bool

	old, new []float64
}

// TrialWarning sums up the warnings (results.Record.Warnings) of one side's
// successful trials at one compared point.
type TrialWarning struct {
	// Datapath, Workload and Params (params.Key()) name the point.
	Datapath, Workload, Params string
	// New is set for the new run's trials, clear for the old run's.
	New bool
	// Trials of Of successful trials carry a warning.
	Trials, Of int
	// Warnings are the distinct warnings, in order of first appearance.
	Warnings []string
}

// Comparison is what Compare found.
type Comparison struct {
	// Changes are the rows, grouped by workload × params.
	Changes []Change
	// Tests is the number of Mann-Whitney U tests of metrics with a
	// direction, adjusted together; NeutralTests those of neutral metrics,
	// adjusted apart so they do not weaken the tests that decide the gate.
	Tests, NeutralTests int
	// RunDifferences say how the runs' setups differ (host, duration,
	// warmup, spanperf version), one sentence each.
	RunDifferences []string
	// TrialWarnings are the warnings of the trials compared.
	TrialWarnings []TrialWarning
}

// Regressed reports whether any change is a regression.
func (c Comparison) Regressed() bool {
	return slices.ContainsFunc(c.Changes, func(c Change) bool { return c.Regression })
}

// Inconclusive reports whether any change is likely worse but untested.
func (c Comparison) Inconclusive() bool {
	return slices.ContainsFunc(c.Changes, func(c Change) bool { return c.Inconclusive })
}

// Compare compares every datapath × workload × params point that has a
// successful trial in old against new, in old's order of points: first its
// trials, then every metric of old's successful trials in name order.
//
// A point with no successful trial in new (absent, or every trial failed)
// is Vanished, a regression; a point where a larger share of new's trials
// failed is MoreFailures, a regression. A metric with no value in new's
// successful trials is Vanished, a regression when it has a direction. For
// errors, timeouts and sustained, a larger share of new trials with errors,
// with timeouts, or not sustained is MoreFailures, a regression.
//
// Every other metric is tested with the Mann-Whitney U test when both sides
// have at least MinCompareReps values and those sample sizes can reach a
// p-value below Alpha; otherwise its verdict is TooFewReps. The p-values are
// adjusted by Benjamini–Hochberg, those of metrics with a direction in one
// family and those of neutral metrics in another. With adjusted p < Alpha the
// verdict is Better or Worse by the metric's direction (Changed for neutral
// metrics), else NoChange. A metric with a direction that the test could not
// call worse (TooFewReps, or NoChange) but whose every new value is worse
// than every old value by more than the threshold is LikelyWorse:
// inconclusive, not a regression.
func Compare(old, new Run, opts CompareOptions) Comparison {
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
	cmp := Comparison{RunDifferences: runDifferences(old.Manifest, new.Manifest)}
	for _, k := range order {
		orecs, nrecs := oldG[k], newG[k]
		oOK, nOK := succeeded(orecs), succeeded(nrecs)
		if oOK == 0 {
			continue // nothing in old to hold new to
		}
		row := Change{Datapath: k.d, Workload: k.w, Params: k.p, Metric: TrialsMetric,
			OldN: oOK, NewN: nOK, Old: math.NaN(), New: math.NaN(), Pct: math.NaN(), P: math.NaN(), RawP: math.NaN()}
		oFail, nFail := len(orecs)-oOK, len(nrecs)-nOK
		switch {
		case nOK == 0:
			row.OldText, row.NewText = fmt.Sprintf("%d/%d failed", oFail, len(orecs)), "absent"
			row.Note = "no trial of this point in the new run"
			if len(nrecs) > 0 {
				row.NewText = fmt.Sprintf("%d/%d failed", nFail, len(nrecs))
				row.Note = "every new trial failed: " + firstError(nrecs)
			}
			row.Verdict, row.Regression = Vanished, true
			cmp.Changes = append(cmp.Changes, row)
			cmp.TrialWarnings = appendTrialWarning(cmp.TrialWarnings, orecs, false)
			continue
		case nFail*len(orecs) > oFail*len(nrecs): // a larger share failed
			row.OldText = fmt.Sprintf("%d/%d failed", oFail, len(orecs))
			row.NewText = fmt.Sprintf("%d/%d failed", nFail, len(nrecs))
			row.Note = "a new trial failed: " + firstError(nrecs)
			row.Verdict, row.Regression = MoreFailures, true
			cmp.Changes = append(cmp.Changes, row)
		}
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
			cmp.Changes = append(cmp.Changes, compareMetric(k.d, k.w, k.p, m, values(orecs, m), values(nrecs, m), nrecs))
		}
		cmp.TrialWarnings = appendTrialWarning(cmp.TrialWarnings, orecs, false)
		cmp.TrialWarnings = appendTrialWarning(cmp.TrialWarnings, nrecs, true)
	}
	cmp.Tests, cmp.NeutralTests = decide(cmp.Changes, opts)
	return cmp
}

// thinTail reports whether metric m is a tail percentile that every one of
// recs withheld because it had too few latency samples for it.
func thinTail(m string, recs []results.Record) bool {
	min := 0
	for _, t := range results.TailMinSamples {
		if t.Metric == m {
			min = t.Min
		}
	}
	if min == 0 || len(recs) == 0 {
		return false
	}
	for _, r := range recs {
		n, ok := r.Metrics[results.LatencySamples]
		if !ok || n >= float64(min) {
			return false
		}
	}
	return true
}

// compareMetric fills in what one metric's values say before the p-values
// are adjusted: medians, change, raw p, and the verdicts that need no test.
func compareMetric(d, w, p, m string, a, b []float64, nrecs []results.Record) Change {
	sa, sb := stats.Summarize(a), stats.Summarize(b)
	c := Change{Datapath: d, Workload: w, Params: p, Metric: m, OldN: sa.N, NewN: sb.N,
		Old: sa.Median, New: sb.Median, Pct: stats.ChangePct(sa.Median, sb.Median),
		P: math.NaN(), RawP: math.NaN(), old: a, new: b}
	if len(b) == 0 {
		c.New, c.Pct, c.NewText = math.NaN(), math.NaN(), "–"
		c.Verdict, c.Note = Vanished, "not in any successful new trial"
		if why := missingReason(nrecs, m); why != "" {
			c.Note = "missing from the new trials: " + why
		}
		// A tail percentile withheld for too few samples (a shorter or
		// slower new run) is not a lost figure: the rate shows the change.
		c.Regression = MetricDirection(m) != Neutral && !thinTail(m, nrecs)
		return c
	}
	if failed, what := failureKind(m); failed != nil {
		of, nf := count(a, failed), count(b, failed)
		if nf*len(a) > of*len(b) {
			c.Verdict, c.Regression = MoreFailures, true
			c.Note = fmt.Sprintf("%s: %d/%d old, %d/%d new", what, of, len(a), nf, len(b))
			return c
		}
	}
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
	c.RawP = pv
	return c
}

// decide adjusts the raw p-values of changes, one family for metrics with a
// direction and one for neutral metrics, sets the verdicts of the tested
// changes and finds the likely-worse ones. It returns the families' sizes.
func decide(changes []Change, opts CompareOptions) (tests, neutralTests int) {
	var fam [2][]int // 0: with a direction, 1: neutral
	for i, c := range changes {
		if math.IsNaN(c.RawP) {
			continue
		}
		f := 0
		if MetricDirection(c.Metric) == Neutral {
			f = 1
		}
		fam[f] = append(fam[f], i)
	}
	for _, idx := range fam {
		ps := make([]float64, len(idx))
		for j, i := range idx {
			ps[j] = changes[i].RawP
		}
		for j, adj := range stats.AdjustBH(ps) {
			c := &changes[idx[j]]
			c.P = adj
			dir := MetricDirection(c.Metric)
			switch {
			case adj >= Alpha:
				c.Verdict = NoChange
				if adj != c.RawP && c.RawP < Alpha {
					c.Note = fmt.Sprintf("p=%.2g before adjusting for %d tests", c.RawP, len(idx))
				}
			case dir == Neutral || c.New == c.Old:
				c.Verdict = Changed
			case (c.New > c.Old) == (dir == HigherIsBetter):
				c.Verdict = Better
			default:
				c.Verdict = Worse
				c.Regression = worseBy(c.Old, c.New, dir, opts.ThresholdPct)
			}
		}
	}
	for i := range changes {
		c := &changes[i]
		dir := MetricDirection(c.Metric)
		if dir == Neutral || (c.Verdict != TooFewReps && c.Verdict != NoChange) || len(c.old) == 0 || len(c.new) == 0 {
			continue
		}
		// Every new value worse than every old one: the closest pair is
		// the old run's worst and the new run's best.
		oWorst, nBest := slices.Min(c.old), slices.Max(c.new)
		if dir == LowerIsBetter {
			oWorst, nBest = slices.Max(c.old), slices.Min(c.new)
		}
		if !worseBy(oWorst, nBest, dir, opts.ThresholdPct) {
			continue
		}
		why := c.Note
		if why == "" {
			why = fmt.Sprintf("p=%.2g", c.P)
		}
		c.Verdict, c.Inconclusive = LikelyWorse, true
		c.Note = fmt.Sprintf("%s; every new value is worse than every old one by more than %g%%", why, opts.ThresholdPct)
	}
	return len(fam[0]), len(fam[1])
}

// worseBy reports whether x is worse than base, in direction dir, by more
// than pct percent of |base|. Any worsening of a zero base counts.
func worseBy(base, x float64, dir Direction, pct float64) bool {
	margin := math.Abs(base) * pct / 100
	switch dir {
	case HigherIsBetter:
		return x < base-margin
	case LowerIsBetter:
		return x > base+margin
	}
	return false
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

func succeeded(recs []results.Record) int {
	n := 0
	for _, r := range recs {
		if r.Error == "" {
			n++
		}
	}
	return n
}

func count(vs []float64, f func(float64) bool) int {
	n := 0
	for _, v := range vs {
		if f(v) {
			n++
		}
	}
	return n
}

// firstError is the first failed trial's error, shortened for a footnote.
func firstError(recs []results.Record) string {
	for _, r := range recs {
		if r.Error != "" {
			return shorten(r.Error, 160)
		}
	}
	return ""
}

// missingReason is why the first successful trial that gives one could not
// measure metric (results.Record.Missing).
func missingReason(recs []results.Record, metric string) string {
	for _, r := range recs {
		if why := r.Missing[metric]; r.Error == "" && why != "" {
			return shorten(why, 160)
		}
	}
	return ""
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func appendTrialWarning(tws []TrialWarning, recs []results.Record, isNew bool) []TrialWarning {
	tw := TrialWarning{New: isNew}
	for _, r := range recs {
		if r.Error != "" {
			continue
		}
		tw.Of++
		tw.Datapath, tw.Workload, tw.Params = r.Datapath, r.Workload, r.Params.Key()
		if len(r.Warnings) > 0 {
			tw.Trials++
		}
		for _, w := range r.Warnings {
			if !slices.Contains(tw.Warnings, w) {
				tw.Warnings = append(tw.Warnings, w)
			}
		}
	}
	if tw.Trials == 0 {
		return tws
	}
	return append(tws, tw)
}

// runDifferences says how two runs' setups differ in what bears on their
// figures: host, duration, warmup and spanperf version. A value a manifest
// lacks (an older run) is shown as "unknown" when the other has it.
func runDifferences(o, n results.Manifest) []string {
	var out []string
	var host []string
	diff := func(list *[]string, what string, a, b any) {
		sa, sb := fmt.Sprint(a), fmt.Sprint(b)
		if sa == sb {
			return
		}
		if sa == "" || sa == "0" {
			sa = "unknown"
		}
		if sb == "" || sb == "0" {
			sb = "unknown"
		}
		*list = append(*list, fmt.Sprintf("%s %s → %s", what, sa, sb))
	}
	diff(&host, "hostname", o.Host.Hostname, n.Host.Hostname)
	diff(&host, "kernel", o.Host.Kernel, n.Host.Kernel)
	diff(&host, "CPU", o.Host.CPUModel, n.Host.CPUModel)
	diff(&host, "cores", o.Host.Cores, n.Host.Cores)
	diff(&host, "memory", o.Host.MemBytes, n.Host.MemBytes)
	if len(host) > 0 {
		out = append(out, "the runs ran on different hosts: "+strings.Join(host, ", "))
	}
	type timing struct {
		Duration *time.Duration `json:"duration"`
		Warmup   *time.Duration `json:"warmup"`
	}
	var ot, nt timing
	if json.Unmarshal(o.Scenario, &ot) == nil && json.Unmarshal(n.Scenario, &nt) == nil {
		for _, d := range []struct {
			what string
			a, b *time.Duration
		}{{"duration", ot.Duration, nt.Duration}, {"warmup", ot.Warmup, nt.Warmup}} {
			if d.a != nil && d.b != nil && *d.a != *d.b {
				out = append(out, fmt.Sprintf("the runs' %s differs: %v → %v", d.what, *d.a, *d.b))
			}
		}
	}
	ver := func(m results.Manifest) string {
		if m.Version == "" && m.Revision == "" {
			return ""
		}
		return strings.TrimSpace(m.Version + " " + m.Revision)
	}
	var v []string
	diff(&v, "spanperf", ver(o), ver(n))
	if len(v) > 0 {
		out = append(out, "the runs were made by different spanperf versions: "+strings.TrimPrefix(v[0], "spanperf "))
	}
	return out
}

// WriteComparison writes cmp as plain-text tables, benchstat style: first a
// warning per difference in the runs' setups, then one table per workload ×
// params, a row per datapath × metric with the old and new medians
// (FormatValue), the change, the adjusted p-value with the sample sizes and
// the verdict; regressions are marked "!" and likely-worse changes "?".
// Then the notes, the trials' warnings, the verdict counts with how the
// p-values were adjusted, and a last line that counts regressions and
// likely-worse changes. oldLabel and newLabel head the median columns.
func WriteComparison(w io.Writer, oldLabel, newLabel string, cmp Comparison, opts CompareOptions) error {
	var buf bytes.Buffer
	for _, d := range cmp.RunDifferences {
		fmt.Fprintf(&buf, "warning: %s\n", d)
	}
	if len(cmp.RunDifferences) > 0 {
		buf.WriteByte('\n')
	}
	changes := cmp.Changes
	var footnotes []string
	if len(changes) == 0 {
		buf.WriteString("no datapath × workload × params point has a successful trial in the old run\n")
	}
	for i := 0; i < len(changes); {
		j := i
		for j < len(changes) && changes[j].Workload == changes[i].Workload && changes[j].Params == changes[i].Params {
			j++
		}
		if i > 0 {
			buf.WriteByte('\n')
		}
		fmt.Fprintf(&buf, "%s %s\n", changes[i].Workload, paramsText(changes[i].Params))
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
			switch {
			case c.Regression:
				v = "! " + v
			case c.Inconclusive:
				v = "? " + v
			}
			oldV, newV := c.OldText, c.NewText
			if oldV == "" {
				oldV = FormatValue(c.Metric, c.Old)
			}
			if newV == "" {
				newV = FormatValue(c.Metric, c.New)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Datapath, c.Metric, oldV, newV, pct, p, v)
		}
		tw.Flush()
		i = j
	}
	counts := map[Verdict]int{}
	regressions, inconclusive := 0, 0
	for _, c := range changes {
		counts[c.Verdict]++
		if c.Regression {
			regressions++
		}
		if c.Inconclusive {
			inconclusive++
		}
	}
	var parts []string
	for _, v := range []Verdict{Better, Worse, Changed, NoChange, TooFewReps, NotComparable, LikelyWorse, Vanished, MoreFailures} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	buf.WriteByte('\n')
	for i, f := range footnotes {
		fmt.Fprintf(&buf, "%s %s\n", markerSymbol(i), f)
	}
	if len(cmp.TrialWarnings) > 0 {
		buf.WriteString("warnings of the trials compared:\n")
		for _, tw := range cmp.TrialWarnings {
			side := oldLabel
			if tw.New {
				side = newLabel
			}
			more := ""
			if len(tw.Warnings) > 1 {
				more = fmt.Sprintf(" (+%d more)", len(tw.Warnings)-1)
			}
			fmt.Fprintf(&buf, "  %s %s %s, %s: %d of %d trials: %s%s\n", tw.Workload, paramsText(tw.Params), tw.Datapath,
				side, tw.Trials, tw.Of, shorten(tw.Warnings[0], 200), more)
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&buf, "%s; alpha %g\n", strings.Join(parts, ", "), Alpha)
	}
	if cmp.Tests+cmp.NeutralTests > 0 {
		fmt.Fprintf(&buf, "p: two-sided Mann-Whitney U, adjusted by %s over the %d tests of metrics with a direction (%d tests of neutral metrics adjusted apart)\n",
			stats.AdjustMethod, cmp.Tests, cmp.NeutralTests)
	}
	fmt.Fprintf(&buf, "%d regressions (worse by more than %g%% with p < %g, vanished, or more failures); %d likely worse but too few repetitions to test\n",
		regressions, opts.ThresholdPct, Alpha, inconclusive)
	if _, err := w.Write(trimLines(buf.Bytes())); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

func paramsText(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}
