package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

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

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name       string
		metric     string
		old, new   []float64
		verdict    Verdict
		p          float64 // NaN: not tested
		regression bool
	}{
		// Fully separated 5+5: exact p = 2/C(10,5) = 2/252.
		{"throughput down", results.ThroughputBPS, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Worse, 2.0 / 252, true},
		{"throughput up", results.ThroughputBPS, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Better, 2.0 / 252, false},
		{"latency down", results.LatencyP99, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Better, 2.0 / 252, false},
		{"latency up", results.LatencyP99, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Worse, 2.0 / 252, true},
		// CPU grows with the load carried: no direction, never a regression.
		{"cpu up", results.CPUCoresDatapath, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Changed, 2.0 / 252, false},
		{"per-core down", results.ThroughputBPSPerCore, []float64{10, 11, 12, 13, 14}, []float64{5, 6, 7, 8, 9}, Worse, 2.0 / 252, true},
		{"neutral", results.Bytes, []float64{5, 6, 7, 8, 9}, []float64{10, 11, 12, 13, 14}, Changed, 2.0 / 252, false},
		// Interleaved: U = 10, P(U ≤ 10) = 87/252 (Mann-Whitney table), p = 2·87/252.
		{"same", results.ThroughputBPS, []float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}, NoChange, 2 * 87.0 / 252, false},
		{"3+3 cannot reach alpha", results.ThroughputBPS, []float64{10, 11, 12}, []float64{1, 2, 3}, TooFewReps, math.NaN(), false},
		{"2 reps", results.ThroughputBPS, []float64{10, 11}, []float64{1, 2, 3, 4, 5}, TooFewReps, math.NaN(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := Compare(runOf(tc.metric, "x", tc.old...), runOf(tc.metric, "x", tc.new...), CompareOptions{ThresholdPct: 5})
			if len(ch) != 1 {
				t.Fatalf("got %d changes, want 1", len(ch))
			}
			c := ch[0]
			if c.Verdict != tc.verdict || c.Regression != tc.regression {
				t.Errorf("verdict %q regression %v, want %q %v (%+v)", c.Verdict, c.Regression, tc.verdict, tc.regression, c)
			}
			if math.IsNaN(tc.p) != math.IsNaN(c.P) || (!math.IsNaN(tc.p) && math.Abs(c.P-tc.p) > 1e-3) {
				t.Errorf("p = %v, want %v", c.P, tc.p)
			}
			if Regressed(ch) != tc.regression {
				t.Errorf("Regressed = %v", !tc.regression)
			}
		})
	}
}

func TestCompareThresholdAndOutput(t *testing.T) {
	old := runOf(results.ThroughputBPS, "x", 100, 101, 102, 103, 104)
	new := runOf(results.ThroughputBPS, "x", 97, 97.5, 98, 98.5, 99) // -3.9%, significant
	if ch := Compare(old, new, CompareOptions{ThresholdPct: 5}); Regressed(ch) || ch[0].Verdict != Worse {
		t.Errorf("a 4%% worsening under a 5%% threshold: %+v", ch)
	}
	opts := CompareOptions{ThresholdPct: 1}
	ch := Compare(old, new, opts)
	if !Regressed(ch) {
		t.Errorf("a 4%% worsening over a 1%% threshold is not a regression: %+v", ch)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, "old", "new", ch, opts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stream streams=1", "-3.9%", "p=0.008 n=5+5", "! worse", "1 regressions"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, buf.String())
		}
	}
}
