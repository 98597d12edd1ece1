package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// costRecords are native against wireguard-go with the CPU probe's
// figures: wireguard-go has daemons (cpu_cores_datapath), native has only
// the kernel; both have the whole path's cores (cpu_cores_path) and its
// cost per gigabyte or per transaction. rr also ran paced at 1000/s, where
// cpu_cores_over_baseline is derived; one of wireguard's paced trials
// shared the machine with foreign CPU and carries the warning. crr ran
// without the probe.
func costRecords() []results.Record {
	type m = map[string]float64
	var recs []results.Record
	add := func(dp, wl string, p results.Params, rep int, metrics m, warnings ...string) {
		recs = append(recs, results.Record{Run: "r2", Trial: len(recs), Datapath: dp, Workload: wl,
			Params: p, Rep: rep, Metrics: metrics, Warnings: warnings})
	}
	none := results.Params{}
	paced := results.Params{"rate": float64(1000)}
	for rep, f := range []float64{1, 0.98, 1.03} {
		// stream over 10 s: CPU-s/GB = path cores × 10 / (bps × 10 / 8 / 1e9).
		add("native", "stream", none, rep, m{results.ThroughputBPS: 9.2e9 * f, results.CPUCoresSoftirq: 0.39,
			results.CPUCoresPath: 1.9, results.ThroughputBPSPerCore: 9.2e9 * f / 1.9, results.CPUSecondsPerGigabyte: 1.9 * 8 / (9.2 * f)})
		add("wireguard", "stream", none, rep, m{results.ThroughputBPS: 0.71e9 * f, results.CPUCoresDatapath: 1.21 * f,
			results.CPUCoresPath: 1.95, results.ThroughputBPSPerCore: 0.71e9 * f / 1.95, results.CPUSecondsPerGigabyte: 1.95 * 8 / (0.71 * f)})
		add("native", "rr", none, rep, m{results.TransactionsPerS: 24100 * f, results.LatencyP50: 38e-6 / f, results.LatencyP99: 61e-6 / f,
			results.CPUCoresPath: 1.1, results.TransactionsPerSPerCore: 24100 * f / 1.1, results.CPUMicrosPerTransaction: 1.1 / (24100 * f) * 1e6})
		add("wireguard", "rr", none, rep, m{results.TransactionsPerS: 2240 * f, results.LatencyP50: 401e-6 / f, results.LatencyP99: 1.2e-3 / f,
			results.CPUCoresDatapath: 0.76 * f, results.CPUCoresPath: 1.3, results.TransactionsPerSPerCore: 2240 * f / 1.3,
			results.CPUMicrosPerTransaction: 1.3 / (2240 * f) * 1e6})
		// Paced: the same 1000 transactions/s, native's path 0.05 cores
		// (median 0.05), wireguard's 0.21, 0.20, 0.23.
		add("native", "rr", paced, rep, m{results.TransactionsPerS: 1000, results.LatencyP50: 40e-6 / f, results.LatencyP99: 70e-6 / f,
			results.CPUCoresPath: 0.05 * f, results.CPUMicrosPerTransaction: 50 * f})
		var warn []string
		if rep == 1 {
			warn = []string{"foreign CPU: 0.43 cores of processes not in the run shared the machine; the CPU figures exclude them, but the rates may be lower"}
		}
		add("wireguard", "rr", paced, rep, m{results.TransactionsPerS: 1000, results.LatencyP50: 420e-6 / f, results.LatencyP99: 1.1e-3 / f,
			results.CPUCoresDatapath: 0.15 * f, results.CPUCoresPath: 0.21 * f, results.CPUMicrosPerTransaction: 210 * f}, warn...)
		add("native", "crr", none, rep, m{results.ConnectionsPerS: 8800 * f, results.LatencyP50: 110e-6, results.LatencyP99: 230e-6})
		add("wireguard", "crr", none, rep, m{results.ConnectionsPerS: 1500 * f, results.LatencyP50: 640e-6, results.LatencyP99: 1.9e-3})
	}
	return recs
}

// Cost columns appear for a workload when its records carry them, and
// not for one whose records do not (crr here; every table of
// summary.golden).
func TestSummaryCostGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Summary(&buf, costRecords(), SummaryOptions{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "summary_cost.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("summary differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

// cpu_cores_over_baseline is a paced trial's path cores less the median
// path cores of the baseline's trials at the same params; unpaced points,
// failed trials and points without a baseline value do not get it, and
// the records passed in are not changed.
func TestWithOverBaseline(t *testing.T) {
	recs := costRecords()
	recs = append(recs, results.Record{Datapath: "wireguard", Workload: "rr", Params: results.Params{"rate": float64(1000)}, Rep: 3, Error: "boom"},
		results.Record{Datapath: "wireguard", Workload: "rr", Params: results.Params{"rate": float64(2000)}, Rep: 0,
			Metrics: map[string]float64{results.CPUCoresPath: 0.4}})
	out := withOverBaseline(recs, "native")
	got := map[string][]float64{}
	for i, r := range out {
		if _, ok := recs[i].Metrics[results.CPUCoresOverBaseline]; ok {
			t.Fatalf("record %d of the input was changed", i)
		}
		if v, ok := r.Metrics[results.CPUCoresOverBaseline]; ok {
			k := r.Datapath + " " + r.Params.Key()
			got[k] = append(got[k], math.Round(v*1e6)/1e6)
		}
	}
	want := map[string][]float64{
		"native rate=1000":    {0, -0.001, 0.0015},
		"wireguard rate=1000": {0.16, 0.1558, 0.1663},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cpu_cores_over_baseline %v, want %v", got, want)
	}
}

// The report's tables carry the path's cost, cpu_cores_over_baseline at
// the paced point (without a Δ of its own), and the trials' warnings: in
// Markdown (a golden file), CSV (a row per paced trial, in cores) and JSON
// (no delta_pct for it; the warning among the run's).
func TestReportCost(t *testing.T) {
	runs := []Run{{Dir: "runs/r2", Records: costRecords(), Manifest: results.Manifest{Run: "r2"}}}
	var md bytes.Buffer
	if err := Markdown(&md, runs, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report_cost.md.golden", md.Bytes())

	var csvOut bytes.Buffer
	if err := CSV(&csvOut, runs, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	if want := "r2,wireguard,rr,rate=1000,0,5,cpu_cores_over_baseline,0.15999999999999998,cores,"; !strings.Contains(csvOut.String(), want) {
		t.Errorf("csv lacks %q:\n%s", want, csvOut.String())
	}
	if want := ",cpu_us_per_transaction,210,µs,"; !strings.Contains(csvOut.String(), want) {
		t.Errorf("csv lacks %q", want)
	}

	var js bytes.Buffer
	if err := JSON(&js, runs, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Warnings []string `json:"warnings"`
		} `json:"runs"`
		Summaries []MetricSummary `json:"summaries"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range doc.Summaries {
		if s.Metric == results.CPUCoresOverBaseline && s.Datapath == "wireguard" {
			found = true
			if s.DeltaPct != nil || math.Abs(float64(s.Median)-0.16) > 1e-9 {
				t.Errorf("json cpu_cores_over_baseline %+v, want median 0.16 without delta_pct", s)
			}
		}
	}
	if !found {
		t.Error("json: no cpu_cores_over_baseline summary for wireguard")
	}
	if len(doc.Runs) != 1 || !slices.ContainsFunc(doc.Runs[0].Warnings, func(w string) bool {
		return strings.HasPrefix(w, "foreign CPU in 1 of 24 trials, the first: foreign CPU: 0.43 cores")
	}) {
		t.Errorf("json run warnings %q, want the foreign CPU one", doc.Runs)
	}
}

// The HTML report charts the path's cost and lists the trials' warnings.
func TestHTMLCost(t *testing.T) {
	runs := []Run{{Dir: "runs/r2", Records: costRecords(), Manifest: results.Manifest{Run: "r2"}}}
	var buf bytes.Buffer
	if err := HTML(&buf, runs, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"path CPU-seconds per GB · stream", "path CPU per transaction · rr", "path cores over baseline · rr",
		"foreign CPU in 1 of 24 trials, the first: foreign CPU: 0.43 cores"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("html lacks %q", want)
		}
	}
}

// The path's cost per unit of work is efficiency, lower is better; the
// cores themselves grow with the load and have no direction.
func TestCostDirection(t *testing.T) {
	for m, want := range map[string]Direction{
		results.CPUSecondsPerGigabyte:   LowerIsBetter,
		results.CPUMicrosPerTransaction: LowerIsBetter,
		results.CPUCoresPath:            Neutral,
		results.CPUCoresForeign:         Neutral,
		results.ThroughputBPSPerCore:    HigherIsBetter,
	} {
		if got := MetricDirection(m); got != want {
			t.Errorf("MetricDirection(%s) = %v, want %v", m, got, want)
		}
	}
}
