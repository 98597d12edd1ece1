package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// costRecords are native against wireguard-go with the CPU probe's
// figures: wireguard-go has daemons (cpu_cores_datapath), native has only
// the kernel, so its per-core throughput is per softirq core and it has no
// cpu_cores_datapath. crr ran without the probe.
func costRecords() []results.Record {
	type m = map[string]float64
	var recs []results.Record
	add := func(dp, wl string, rep int, metrics m) {
		recs = append(recs, results.Record{Run: "r2", Trial: len(recs), Datapath: dp, Workload: wl,
			Params: results.Params{}, Rep: rep, Metrics: metrics})
	}
	for rep, f := range []float64{1, 0.98, 1.03} {
		add("native", "stream", rep, m{results.ThroughputBPS: 9.2e9 * f, results.CPUCoresSoftirq: 0.39,
			results.ThroughputBPSPerCore: 9.2e9 * f / 0.39})
		add("wireguard", "stream", rep, m{results.ThroughputBPS: 0.71e9 * f, results.CPUCoresDatapath: 1.21 * f,
			results.ThroughputBPSPerCore: 0.71e9 / 1.21})
		add("native", "rr", rep, m{results.TransactionsPerS: 24100 * f, results.LatencyP50: 38e-6 / f, results.LatencyP99: 61e-6 / f,
			results.TransactionsPerSPerCore: 24100 * f / 0.42})
		add("wireguard", "rr", rep, m{results.TransactionsPerS: 2240 * f, results.LatencyP50: 401e-6 / f, results.LatencyP99: 1.2e-3 / f,
			results.CPUCoresDatapath: 0.76 * f, results.TransactionsPerSPerCore: 2240 / 0.76})
		add("native", "crr", rep, m{results.ConnectionsPerS: 8800 * f, results.LatencyP50: 110e-6, results.LatencyP99: 230e-6})
		add("wireguard", "crr", rep, m{results.ConnectionsPerS: 1500 * f, results.LatencyP50: 640e-6, results.LatencyP99: 1.9e-3})
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
