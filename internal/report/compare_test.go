package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

func runOf(metric string, dp string, vals ...float64) Run {
	var recs []results.Record
	for i, v := range vals {
		recs = append(recs, results.Record{Datapath: dp, Workload: "stream", Rep: i,
			Params: results.Params{"streams": int64(1)}, Metrics: map[string]float64{metric: v}})
	}
	return Run{Dir: "r", Records: recs}
}

// metricRow is the change of metric in cmp; it fails the test when there is
// not exactly one.
func metricRow(t *testing.T, cmp Comparison, datapath, metric string) Change {
	t.Helper()
	var found []Change
	for _, c := range cmp.Changes {
		if c.Datapath == datapath && c.Metric == metric {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rows for %s %s, want 1: %+v", len(found), datapath, metric, cmp.Changes)
	}
	return found[0]
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		metric                   string
		old, new                 []float64
		verdict                  Verdict
		p                        float64 // NaN: not tested
		regression, inconclusive bool
	}{
		// Fully separated 5+5: exact p = 2/C(10,5) = 2/252.
		{"throughput down", results.ThroughputBPS, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Worse, 2.0 / 252, true, false},
		{"throughput up", results.ThroughputBPS, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Better, 2.0 / 252, false, false},
		{"latency down", results.LatencyP99, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Better, 2.0 / 252, false, false},
		{"latency up", results.LatencyP99, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Worse, 2.0 / 252, true, false},
		// CPU grows with the load carried: no direction, never a regression.
		{"cpu up", results.CPUCoresDatapath, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Changed, 2.0 / 252, false, false},
		{"per-core down", results.ThroughputBPSPerCore, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Worse, 2.0 / 252, true, false},
		{"neutral", results.Bytes, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Changed, 2.0 / 252, false, false},
		{"retransmits up", results.Retransmits, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Worse, 2.0 / 252, true, false},
		{"cost per gigabyte up", results.CPUSecondsPerGigabyte, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Worse, 2.0 / 252, true, false},
		// Interleaved: U = 10, P(U ≤ 10) = 87/252 (Mann-Whitney table), p = 2·87/252.
		{"same", results.ThroughputBPS, []float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}, NoChange, 2 * 87.0 / 252, false, false},
		// 3+3 cannot reach p < 0.05 (the smallest p is 2/C(6,3) = 0.1), but
		// every new value is worse than every old one by more than 5%.
		{"3+3 halved", results.ThroughputBPS, []float64{10, 11, 12}, []float64{5, 5.5, 6}, LikelyWorse, math.NaN(), false, true},
		{"3+3 latency doubled", results.LatencyP50, []float64{1, 1.1, 1.2}, []float64{2, 2.1, 2.2}, LikelyWorse, math.NaN(), false, true},
		{"2 reps", results.ThroughputBPS, []float64{10, 11}, []float64{1, 2, 3, 4, 5}, LikelyWorse, math.NaN(), false, true},
		// Separated, but the closest pair (10 old, 9.6 new) differs by 4%,
		// under the 5% threshold: not even likely worse.
		{"3+3 within threshold", results.ThroughputBPS, []float64{10, 11, 12}, []float64{9.4, 9.5, 9.6}, TooFewReps, math.NaN(), false, false},
		// Overlapping: the test cannot decide and nothing says worse.
		{"3+3 overlapping", results.ThroughputBPS, []float64{10, 11, 12}, []float64{5, 6, 10.5}, TooFewReps, math.NaN(), false, false},
		{"3+3 better", results.ThroughputBPS, []float64{5, 5.5, 6}, []float64{10, 11, 12}, TooFewReps, math.NaN(), false, false},
		{"3+3 neutral", results.Bytes, []float64{10, 11, 12}, []float64{5, 5.5, 6}, TooFewReps, math.NaN(), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmp := Compare(runOf(tc.metric, "x", tc.old...), runOf(tc.metric, "x", tc.new...), CompareOptions{ThresholdPct: 5})
			if len(cmp.Changes) != 1 {
				t.Fatalf("got %d changes, want 1: %+v", len(cmp.Changes), cmp.Changes)
			}
			c := cmp.Changes[0]
			if c.Verdict != tc.verdict || c.Regression != tc.regression || c.Inconclusive != tc.inconclusive {
				t.Errorf("verdict %q regression %v inconclusive %v, want %q %v %v (%+v)", c.Verdict, c.Regression, c.Inconclusive,
					tc.verdict, tc.regression, tc.inconclusive, c)
			}
			if math.IsNaN(tc.p) != math.IsNaN(c.P) || (!math.IsNaN(tc.p) && math.Abs(c.P-tc.p) > 1e-3) {
				t.Errorf("p = %v, want %v", c.P, tc.p)
			}
			if cmp.Regressed() != tc.regression || cmp.Inconclusive() != tc.inconclusive {
				t.Errorf("Regressed %v Inconclusive %v", cmp.Regressed(), cmp.Inconclusive())
			}
		})
	}
}

func TestCompareThresholdAndOutput(t *testing.T) {
	old := runOf(results.ThroughputBPS, "x", 100, 101, 102, 103, 104)
	new := runOf(results.ThroughputBPS, "x", 97, 97.5, 98, 98.5, 99) // -3.9%, significant
	if cmp := Compare(old, new, CompareOptions{ThresholdPct: 5}); cmp.Regressed() || cmp.Changes[0].Verdict != Worse {
		t.Errorf("a 4%% worsening under a 5%% threshold: %+v", cmp.Changes)
	}
	opts := CompareOptions{ThresholdPct: 1}
	cmp := Compare(old, new, opts)
	if !cmp.Regressed() {
		t.Errorf("a 4%% worsening over a 1%% threshold is not a regression: %+v", cmp.Changes)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, "old", "new", cmp, opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stream streams=1", "-3.9%", "p=0.008 n=5+5", "! worse", "1 regressions",
		"adjusted by Benjamini–Hochberg over the 1 tests"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, buf.String())
		}
	}
}

// trialsRun makes a run of one point with one record per entry of metrics;
// a nil map is a failed trial.
func trialsRun(dp string, metrics ...map[string]float64) Run {
	run := Run{Dir: "r"}
	for i, m := range metrics {
		r := results.Record{Datapath: dp, Workload: "rr", Rep: i, Params: results.Params{"concurrency": int64(1)}, Metrics: m}
		if m == nil {
			r.Error = fmt.Sprintf("rep %d: connect: no route to host", i)
		}
		run.Records = append(run.Records, r)
	}
	return run
}

func tps(v float64) map[string]float64 { return map[string]float64{results.TransactionsPerS: v} }

func TestCompareVanishedPoint(t *testing.T) {
	old := trialsRun("vxlan", tps(100), tps(101), tps(102))
	for _, tc := range []struct {
		name, newText, note string
		new                 Run
	}{
		{"every trial failed", "3/3 failed", "every new trial failed: rep 0: connect: no route to host", trialsRun("vxlan", nil, nil, nil)},
		{"absent", "absent", "no trial of this point in the new run", trialsRun("native", tps(100), tps(101), tps(102))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmp := Compare(old, tc.new, CompareOptions{ThresholdPct: 5})
			if len(cmp.Changes) != 1 {
				t.Fatalf("%d changes, want only the trials row: %+v", len(cmp.Changes), cmp.Changes)
			}
			c := metricRow(t, cmp, "vxlan", TrialsMetric)
			if c.Verdict != Vanished || !c.Regression || c.NewText != tc.newText || c.Note != tc.note || !cmp.Regressed() {
				t.Errorf("%+v", c)
			}
		})
	}
	// Failed in both: nothing in old to hold new to.
	if cmp := Compare(trialsRun("vxlan", nil, nil), trialsRun("vxlan", nil, nil), CompareOptions{}); len(cmp.Changes) != 0 {
		t.Errorf("failed in both: %+v", cmp.Changes)
	}
}

func TestCompareMoreFailedTrials(t *testing.T) {
	old := trialsRun("vxlan", tps(100), tps(101), tps(102), nil)
	// Same share failed (1 of 4, then 2 of 8): not more failures.
	same := trialsRun("vxlan", tps(100), tps(101), tps(102), nil, tps(100), tps(101), tps(102), nil)
	if cmp := Compare(old, same, CompareOptions{ThresholdPct: 5}); cmp.Regressed() {
		t.Errorf("same share of failed trials is a regression: %+v", cmp.Changes)
	}
	worse := trialsRun("vxlan", tps(100), nil, tps(102), nil)
	cmp := Compare(old, worse, CompareOptions{ThresholdPct: 5})
	c := metricRow(t, cmp, "vxlan", TrialsMetric)
	if c.Verdict != MoreFailures || !c.Regression || c.OldText != "1/4 failed" || c.NewText != "2/4 failed" ||
		!strings.Contains(c.Note, "no route to host") {
		t.Errorf("%+v", c)
	}
	// The metrics of the trials that succeeded are still compared.
	metricRow(t, cmp, "vxlan", results.TransactionsPerS)
}

func TestCompareVanishedMetric(t *testing.T) {
	rec := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{results.TransactionsPerS: 100, results.LatencyP99: 1e-3, results.CPUCoresBusy: 1}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	old := trialsRun("x", rec(nil), rec(nil), rec(nil))
	new := trialsRun("x", tps(100), tps(100), tps(100))
	new.Records[1].Missing = map[string]string{results.LatencyP99: "fewer than 100 samples"}
	cmp := Compare(old, new, CompareOptions{ThresholdPct: 5})
	lat := metricRow(t, cmp, "x", results.LatencyP99)
	if lat.Verdict != Vanished || !lat.Regression || lat.Note != "missing from the new trials: fewer than 100 samples" {
		t.Errorf("latency vanished: %+v", lat)
	}
	// A neutral metric that vanished is shown, but cannot be worse.
	busy := metricRow(t, cmp, "x", results.CPUCoresBusy)
	if busy.Verdict != Vanished || busy.Regression || busy.Note != "not in any successful new trial" {
		t.Errorf("busy CPU vanished: %+v", busy)
	}
	if !cmp.Regressed() {
		t.Error("a vanished latency is not a regression")
	}
	var buf bytes.Buffer
	WriteComparison(&buf, "old", "new", cmp, CompareOptions{ThresholdPct: 5})
	if !strings.Contains(buf.String(), "! vanished") {
		t.Errorf("output:\n%s", buf.String())
	}
}

func TestCompareFailureCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metric   string
		old, new []float64
		verdict  Verdict
		note     string
		regr     bool
	}{
		// One new trial with errors where the old had none: more failures,
		// whatever the test says.
		{"errors appear", results.Errors, []float64{0, 0, 0}, []float64{0, 3, 0}, MoreFailures, "trials with errors: 0/3 old, 1/3 new", true},
		{"timeouts appear", results.Timeouts, []float64{0, 0, 0, 0, 0}, []float64{1, 0, 0, 0, 0}, MoreFailures, "trials with timeouts: 0/5 old, 1/5 new", true},
		{"sustained falls", results.Sustained, []float64{1, 1, 1}, []float64{1, 0, 0}, MoreFailures, "trials not sustained: 0/3 old, 2/3 new", true},
		{"sustained holds", results.Sustained, []float64{1, 1, 1}, []float64{1, 1, 1}, TooFewReps, "n=3+3: p cannot go below 0.1, need p < 0.05", false},
		{"sustained rises", results.Sustained, []float64{0, 1, 1}, []float64{1, 1, 1}, TooFewReps, "n=3+3: p cannot go below 0.1, need p < 0.05", false},
		// Errors in every trial of both: the counts are tested, lower is better.
		{"more errors", results.Errors, []float64{1, 2, 3, 4, 5}, []float64{10, 11, 12, 13, 14}, Worse, "", true},
		{"fewer errors", results.Errors, []float64{10, 11, 12, 13, 14}, []float64{1, 2, 3, 4, 5}, Better, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmp := Compare(runOf(tc.metric, "x", tc.old...), runOf(tc.metric, "x", tc.new...), CompareOptions{ThresholdPct: 5})
			c := metricRow(t, cmp, "x", tc.metric)
			if c.Verdict != tc.verdict || c.Regression != tc.regr || c.Note != tc.note {
				t.Errorf("got %q %v %q, want %q %v %q", c.Verdict, c.Regression, c.Note, tc.verdict, tc.regr, tc.note)
			}
		})
	}
	// A 0 → positive count is worse by more than any threshold.
	if !worseBy(0, 1, LowerIsBetter, 1000) || worseBy(0, 0, LowerIsBetter, 0) || !worseBy(1, 0, HigherIsBetter, 99) {
		t.Error("worseBy at a zero base")
	}
}

// With many tests, a raw p of 2/252 no longer counts: Benjamini–Hochberg
// over m tests makes the smallest p·m. Fully separated by more than the
// threshold, the change is then likely worse, not a regression.
func TestCompareAdjustsForTheNumberOfTests(t *testing.T) {
	build := func(metrics int, shift float64) Run {
		run := Run{Dir: "r"}
		for rep := 0; rep < 5; rep++ {
			m := map[string]float64{results.ThroughputBPS: 10 + float64(rep) - shift}
			for i := 0; i < metrics-1; i++ {
				// Interleaved between old and new: p = 2·87/252 each.
				m[fmt.Sprintf("latency_x%d_s", i)] = float64(2*rep) + shift/5
			}
			run.Records = append(run.Records, results.Record{Datapath: "x", Workload: "stream", Rep: rep, Metrics: m})
		}
		return run
	}
	for _, tc := range []struct {
		metrics int
		p       float64
		verdict Verdict
	}{
		{1, 2.0 / 252, Worse},
		{3, 2.0 / 252 * 3, Worse},         // 0.024 < 0.05
		{10, 2.0 / 252 * 10, LikelyWorse}, // 0.079 ≥ 0.05
		{30, 2.0 / 252 * 30, LikelyWorse},
	} {
		t.Run(fmt.Sprint(tc.metrics), func(t *testing.T) {
			cmp := Compare(build(tc.metrics, 0), build(tc.metrics, 5), CompareOptions{ThresholdPct: 5})
			if cmp.Tests != tc.metrics {
				t.Errorf("%d tests, want %d", cmp.Tests, tc.metrics)
			}
			c := metricRow(t, cmp, "x", results.ThroughputBPS)
			if c.Verdict != tc.verdict || math.Abs(c.P-tc.p) > 1e-9 || math.Abs(c.RawP-2.0/252) > 1e-9 {
				t.Errorf("verdict %q p %v raw %v, want %q %v", c.Verdict, c.P, c.RawP, tc.verdict, tc.p)
			}
			if tc.verdict == LikelyWorse && (!c.Inconclusive || c.Regression ||
				!strings.Contains(c.Note, fmt.Sprintf("p=0.0079 before adjusting for %d tests", tc.metrics))) {
				t.Errorf("%+v", c)
			}
		})
	}
	// Neutral metrics are adjusted apart and do not weaken the gate.
	old, new := build(1, 0), build(1, 5)
	for i := range old.Records {
		for j := 0; j < 20; j++ {
			old.Records[i].Metrics[fmt.Sprintf("x%d", j)] = float64(i)
			new.Records[i].Metrics[fmt.Sprintf("x%d", j)] = float64(i) + 0.5
		}
	}
	cmp := Compare(old, new, CompareOptions{ThresholdPct: 5})
	if c := metricRow(t, cmp, "x", results.ThroughputBPS); c.Verdict != Worse || cmp.Tests != 1 || cmp.NeutralTests != 20 {
		t.Errorf("with 20 neutral tests: %+v, %d+%d tests", c, cmp.Tests, cmp.NeutralTests)
	}
}

func manifest(host string, dur, warm time.Duration, ver string) results.Manifest {
	sc, _ := json.Marshal(map[string]any{"name": "s", "duration": dur, "warmup": warm})
	return results.Manifest{Version: ver, Revision: "abc", Scenario: sc,
		Host: results.Host{Hostname: host, Kernel: "6.1.0", CPUModel: "EPYC", Cores: 2, MemBytes: 24 << 30}}
}

func TestCompareRunDifferences(t *testing.T) {
	base := manifest("a", 10*time.Second, time.Second, "v0.4.0")
	if d := runDifferences(base, base); len(d) != 0 {
		t.Errorf("same manifests differ: %q", d)
	}
	other := manifest("b", 2*time.Second, 0, "v0.5.0")
	other.Host.Cores = 4
	want := []string{
		"the runs ran on different hosts: hostname a → b, cores 2 → 4",
		"the runs' duration differs: 10s → 2s",
		"the runs' warmup differs: 1s → 0s",
		"the runs were made by different spanperf versions: v0.4.0 abc → v0.5.0 abc",
	}
	got := runDifferences(base, other)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An old run dir without a version or a scenario: unknown, no crash.
	got = runDifferences(results.Manifest{Host: base.Host}, base)
	if len(got) != 1 || got[0] != "the runs were made by different spanperf versions: unknown → v0.4.0 abc" {
		t.Errorf("old manifest: %q", got)
	}
	old, new := runOf(results.ThroughputBPS, "x", 1, 2, 3), runOf(results.ThroughputBPS, "x", 1, 2, 3)
	old.Manifest, new.Manifest = base, other
	var buf bytes.Buffer
	WriteComparison(&buf, "old", "new", Compare(old, new, CompareOptions{}), CompareOptions{})
	if !strings.HasPrefix(buf.String(), "warning: the runs ran on different hosts: hostname a → b, cores 2 → 4\n") {
		t.Errorf("output:\n%s", buf.String())
	}
}

func TestCompareShowsTrialWarnings(t *testing.T) {
	old, new := runOf(results.ThroughputBPS, "x", 1, 2, 3), runOf(results.ThroughputBPS, "x", 1, 2, 3)
	new.Records[0].Warnings = []string{"foreign CPU load 0.42 cores (above 0.1): another job shared the machine"}
	new.Records[2].Warnings = []string{"foreign CPU load 0.30 cores (above 0.1): another job shared the machine", "other"}
	cmp := Compare(old, new, CompareOptions{})
	if len(cmp.TrialWarnings) != 1 {
		t.Fatalf("%+v", cmp.TrialWarnings)
	}
	if tw := cmp.TrialWarnings[0]; !tw.New || tw.Trials != 2 || tw.Of != 3 || len(tw.Warnings) != 3 {
		t.Errorf("%+v", tw)
	}
	var buf bytes.Buffer
	WriteComparison(&buf, "a", "b", cmp, CompareOptions{})
	want := "  stream streams=1 x, b: 2 of 3 trials: foreign CPU load 0.42 cores (above 0.1): another job shared the machine (+2 more)\n"
	if !strings.Contains(buf.String(), "warnings of the trials compared:\n"+want) {
		t.Errorf("output lacks %q:\n%s", want, buf.String())
	}
}

// TestCompareThinTailIsNotVanished: a p99.9 that the new run withheld for
// too few samples (a shorter window) is shown as vanished but does not fail
// the gate; the same percentile gone from trials with samples enough does.
func TestCompareThinTailIsNotVanished(t *testing.T) {
	old := trialsRun("x",
		map[string]float64{results.TransactionsPerS: 100, results.LatencyP999: 1e-3, results.LatencySamples: 5000},
		map[string]float64{results.TransactionsPerS: 100, results.LatencyP999: 1e-3, results.LatencySamples: 5000},
		map[string]float64{results.TransactionsPerS: 100, results.LatencyP999: 1e-3, results.LatencySamples: 5000})
	thin := map[string]float64{results.TransactionsPerS: 100, results.LatencySamples: 600}
	new := trialsRun("x", thin, thin, thin)
	cmp := Compare(old, new, CompareOptions{ThresholdPct: 5})
	if c := metricRow(t, cmp, "x", results.LatencyP999); c.Verdict != Vanished || c.Regression {
		t.Errorf("thin p99.9: %+v", c)
	}
	enough := map[string]float64{results.TransactionsPerS: 100, results.LatencySamples: 5000}
	new = trialsRun("x", enough, enough, enough)
	cmp = Compare(old, new, CompareOptions{ThresholdPct: 5})
	if c := metricRow(t, cmp, "x", results.LatencyP999); !c.Regression {
		t.Errorf("p99.9 gone with 5000 samples is not a regression: %+v", c)
	}
}
