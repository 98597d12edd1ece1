package report

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// testRecords is a small run: native and vxlan, stream at two message sizes
// and rr at two concurrencies, 3 repetitions each, in a shuffled trial order
// as the planner makes it; vxlan's third rr trial at concurrency 8 failed.
func testRecords() []results.Record {
	type m = map[string]float64
	var recs []results.Record
	add := func(dp, wl string, p results.Params, rep int, metrics m, errText string) {
		recs = append(recs, results.Record{
			Run: "r1", Trial: len(recs), Datapath: dp, Workload: wl, Params: p, Rep: rep,
			Metrics: metrics, Error: errText,
		})
	}
	small := results.Params{"msg_size": int64(64)}
	large := results.Params{"msg_size": int64(1400)}
	c1 := results.Params{"concurrency": int64(1)}
	c8 := results.Params{"concurrency": int64(8)}
	rr := func(tps, p50, p99 float64) m {
		return m{results.TransactionsPerS: tps, results.LatencyP50: p50, results.LatencyP99: p99}
	}
	tp := func(bps float64) m { return m{results.ThroughputBPS: bps} }

	add("native", "stream", small, 0, tp(2.41e9), "")
	add("vxlan", "stream", large, 0, tp(7.02e9), "")
	add("native", "rr", c1, 0, rr(31200, 30.1e-6, 52.0e-6), "")
	add("vxlan", "stream", small, 0, tp(1.90e9), "")
	add("native", "stream", large, 0, tp(9.38e9), "")
	add("vxlan", "rr", c8, 0, rr(160500, 48.2e-6, 131e-6), "")
	add("native", "rr", c8, 0, rr(201000, 38.5e-6, 95.1e-6), "")
	add("vxlan", "rr", c1, 0, rr(27400, 34.0e-6, 61.5e-6), "")
	add("native", "stream", small, 1, tp(2.38e9), "")
	add("vxlan", "stream", small, 1, tp(2.62e9), "")
	add("native", "stream", large, 1, tp(9.41e9), "")
	add("vxlan", "stream", large, 1, tp(7.10e9), "")
	add("native", "rr", c1, 1, rr(31500, 29.8e-6, 50.2e-6), "")
	add("vxlan", "rr", c1, 1, rr(27100, 34.4e-6, 63.0e-6), "")
	add("native", "rr", c8, 1, rr(198700, 38.9e-6, 97.4e-6), "")
	add("vxlan", "rr", c8, 1, rr(158900, 48.9e-6, 128e-6), "")
	add("vxlan", "stream", small, 2, tp(3.11e9), "")
	add("native", "stream", small, 2, tp(2.44e9), "")
	add("vxlan", "stream", large, 2, tp(6.95e9), "")
	add("native", "stream", large, 2, tp(9.45e9), "")
	add("native", "rr", c1, 2, rr(31000, 30.3e-6, 51.1e-6), "")
	add("vxlan", "rr", c1, 2, rr(27600, 33.8e-6, 60.9e-6), "")
	add("vxlan", "rr", c8, 2, nil, "agent client: dial tcp 198.18.1.2:7000: connect: connection refused (after 3 attempts)")
	add("native", "rr", c8, 2, rr(199800, 38.2e-6, 96.0e-6), "")
	return recs
}

func TestSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Summary(&buf, testRecords(), SummaryOptions{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "summary.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
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

func TestSummaryZeroOptions(t *testing.T) {
	// Zero options: baseline is the first datapath seen, order as seen.
	var a, b bytes.Buffer
	if err := Summary(&a, testRecords(), SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Summary(&b, testRecords(), SummaryOptions{Baseline: "native", Datapaths: []string{"native", "vxlan"}}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("zero options differ from explicit ones:\n%s\n%s", a.String(), b.String())
	}
}

func TestSummaryMissingDatapath(t *testing.T) {
	recs := testRecords()
	// Drop vxlan's stream trials at msg_size=1400; list a datapath that never ran.
	var kept []results.Record
	for _, r := range recs {
		if r.Datapath == "vxlan" && r.Workload == "stream" && r.Params.Key() == "msg_size=1400" {
			continue
		}
		kept = append(kept, r)
	}
	var buf bytes.Buffer
	err := Summary(&buf, kept, SummaryOptions{Baseline: "vxlan", Datapaths: []string{"vxlan", "wireguard"}})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	// Datapath order: the listed ones, then native.
	var order []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.HasPrefix(l, "msg_size=64") {
			order = append(order, f[1])
		}
	}
	if len(order) != 1 || order[0] != "vxlan" {
		t.Errorf("first row of msg_size=64 is %v, want vxlan", order)
	}
	if !hasRow(out, "wireguard – –") { // never ran
		t.Errorf("no row of – for wireguard:\n%s", out)
	}
	if !strings.Contains(out, "\nΔ: change of the median against vxlan\n") {
		t.Errorf("no Δ line naming vxlan:\n%s", out)
	}
	// vxlan at 1400 has no records: its cell is "–" and native's change is "–".
	for _, l := range lines {
		if strings.HasPrefix(l, "msg_size=1400") {
			if f := strings.Fields(l); len(f) != 3 || f[1] != "vxlan" || f[2] != "–" {
				t.Errorf("vxlan row at msg_size=1400 = %q", l)
			}
		}
	}
	if !hasRow(out, "native 9.41 Gbit/s [9.38, 9.45]* –") {
		t.Errorf("native row at msg_size=1400 should show – for Δ:\n%s", out)
	}
}

func TestSummaryAllFailedAndOtherWorkload(t *testing.T) {
	recs := []results.Record{
		{Datapath: "a", Workload: "http", Params: results.Params{}, Metrics: map[string]float64{"requests_per_s": 1000, results.LatencyP99: 0.002, "other": 1}},
		{Datapath: "a", Workload: "http", Params: results.Params{}, Metrics: map[string]float64{"requests_per_s": 1020, results.LatencyP99: 0.002}},
		{Datapath: "b", Workload: "http", Params: results.Params{}, Error: "boom\n\tsecond line"},
	}
	var buf bytes.Buffer
	if err := Summary(&buf, recs, SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"params datapath requests_per_s Δ latency_p99_s Δ",
		"(none) a 1.01k/s [1.00, 1.02] 2.00 ms [2.00, 2.00]",
		"b – – – – (1 of 1 trials failed: boom second line)",
		"every cell: fewer than 3 repetitions",
	} {
		if !hasRow(out, want) {
			t.Errorf("output lacks row %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "other") {
		t.Errorf("non-headline metric shown:\n%s", out)
	}
}

func TestSummaryErrors(t *testing.T) {
	if err := Summary(&bytes.Buffer{}, nil, SummaryOptions{}); err == nil {
		t.Error("no records: no error")
	}
	if err := Summary(&bytes.Buffer{}, testRecords(), SummaryOptions{Baseline: "geneve"}); err == nil ||
		!strings.Contains(err.Error(), `"geneve"`) {
		t.Errorf("unknown baseline: err = %v", err)
	}
	wantErr := errors.New("disk full")
	err := Summary(failWriter{wantErr}, testRecords(), SummaryOptions{})
	if !errors.Is(err, wantErr) {
		t.Errorf("write failure: err = %v, want wrapping %v", err, wantErr)
	}
}

// hasRow reports whether out has a line whose space-separated fields are
// those of want, so tests do not depend on column widths.
func hasRow(out, want string) bool {
	w := strings.Join(strings.Fields(want), " ")
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == w {
			return true
		}
	}
	return false
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 70)
	got := truncate(long, 60)
	if n := len([]rune(got)); n != 60 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate: %d runes %q", n, got)
	}
	if got := truncate("short", 60); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
}

// TestSummaryBaselineBesideLimits: a limit applies only to the datapaths
// with the component it names, so the baseline ran each point once without
// limit parameters. Its records are the baseline row, marked "(no limit)",
// of each limited point, with Δ against it; they make no group of their own.
func TestSummaryBaselineBesideLimits(t *testing.T) {
	var recs []results.Record
	rr := func(tps float64) map[string]float64 {
		return map[string]float64{results.TransactionsPerS: tps, results.LatencyP50: 1 / tps, results.LatencyP99: 3 / tps}
	}
	for rep := range 3 {
		j := float64(rep)
		recs = append(recs, results.Record{Datapath: "native", Workload: "rr", Rep: rep,
			Params: results.Params{"concurrency": int64(8)}, Metrics: rr(40000 + 100*j)})
		for _, cpu := range []float64{0.5, 1} {
			recs = append(recs, results.Record{Datapath: "mtls-relay", Workload: "rr", Rep: rep,
				Params: results.Params{"concurrency": int64(8), "limit.relay.cpu": cpu}, Metrics: rr(10000*cpu + 100*j)})
		}
	}
	var buf bytes.Buffer
	if err := Summary(&buf, recs, SummaryOptions{Baseline: "native", Datapaths: []string{"native", "mtls-relay"}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"concurrency=8 limit.relay.cpu=0.5 native (no limit) 40.1k/s [40.0, 40.2] 24.9 µs [24.9, 25.0] 74.8 µs [74.6, 75.0]",
		"mtls-relay 5.10k/s [5.00, 5.20] -87.3% 196 µs [192, 200] +686.3% 588 µs [577, 600] +686.3%",
		"concurrency=8 limit.relay.cpu=1 native (no limit) 40.1k/s [40.0, 40.2] 24.9 µs [24.9, 25.0] 74.8 µs [74.6, 75.0]",
		"mtls-relay 10.1k/s [10.0, 10.2] -74.8% 99.0 µs [98.0, 100] +297.0% 297 µs [294, 300] +297.0%",
	} {
		if !hasRow(out, want) {
			t.Errorf("no row %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "concurrency=8 native") || strings.Count(out, "concurrency=8") != 2 {
		t.Errorf("the baseline's unlimited point has a group of its own:\n%s", out)
	}
}

// SummaryOptions.Metrics replaces the headline metrics of the workloads
// whose records carry them (in its order), and leaves the others' alone.
func TestSummaryChosenMetrics(t *testing.T) {
	recs := testRecords()
	for i := range recs {
		if recs[i].Workload == "rr" && recs[i].Metrics != nil {
			recs[i].Metrics[results.LatencyP90] = 2 * recs[i].Metrics[results.LatencyP50]
		}
	}
	var buf bytes.Buffer
	if err := Summary(&buf, recs, SummaryOptions{Baseline: "native", Metrics: []string{results.LatencyP99, results.LatencyP90, "latency_p999_s"}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"params datapath latency_p99_s Δ latency_p90_s Δ",
		"concurrency=1 native 51.1 µs [50.2, 52.0]* 60.2 µs [59.6, 60.6]*",
		"params datapath throughput_bps Δ",
	} {
		if !hasRow(out, want) {
			t.Errorf("no row %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "transactions_per_s") || strings.Contains(out, "latency_p999_s") {
		t.Errorf("rr's headline or an absent metric shown:\n%s", out)
	}
}
