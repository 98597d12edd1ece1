package workload_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// -update rewrites the golden files; registered here unless another file
// of the package already did.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// goldenText renders a parse result or error stably.
func goldenText(res *workload.Result, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var keys []string
	for k := range res.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %.9g\n", k, res.Metrics[k])
	}
	for _, k := range []string{results.ThroughputBPS} {
		if s, ok := res.Series[k]; ok {
			js, _ := json.Marshal(s)
			fmt.Fprintf(&b, "series %s %s\n", k, js)
		}
	}
	if res.Histogram != "" {
		fmt.Fprintf(&b, "histogram %d bytes\n", len(res.Histogram))
	}
	keys = keys[:0]
	for k := range res.Missing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "missing %s: %s\n", k, res.Missing[k])
	}
	return b.String()
}

// checkGolden compares got with testdata/drivers/NAME.golden (rewriting it
// with -update), and checks that a recording whose name holds one of
// errMarks parses to an error and any other does not.
func checkGolden(t *testing.T, name, got string, errMarks ...string) {
	t.Helper()
	golden := filepath.Join("testdata", "drivers", name+".golden")
	if updating() {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	wantErr := false
	for _, m := range errMarks {
		wantErr = wantErr || strings.Contains(name, m)
	}
	if isErr := strings.HasPrefix(got, "error:"); isErr != wantErr {
		t.Errorf("parse error = %v, want error %v", isErr, wantErr)
	}
}

// TestParseGolden parses recorded tool outputs, successes and errors,
// against testdata/drivers/*.golden (rewrite with -update).
func TestParseGolden(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "drivers", name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return b
	}
	parsers := map[string]func(name string) (*workload.Result, error){
		"iperf3": func(n string) (*workload.Result, error) { return workload.ParseIPerf3(read(n + ".out")) },
		"sockperf": func(n string) (*workload.Result, error) {
			return workload.ParseSockperf(read(n+".out"), read(n+".log"), sockperfMode(n))
		},
		"wrk":    func(n string) (*workload.Result, error) { return workload.ParseWrk(read(n + ".out")) },
		"h2load": func(n string) (*workload.Result, error) { return workload.ParseH2load(read(n+".out"), read(n+".log")) },
	}
	outs, _ := filepath.Glob(filepath.Join("testdata", "drivers", "*.out"))
	if len(outs) < 10 {
		t.Fatalf("only %d recorded outputs", len(outs))
	}
	for _, p := range outs {
		name := strings.TrimSuffix(filepath.Base(p), ".out")
		t.Run(name, func(t *testing.T) {
			tool, _, _ := strings.Cut(name, "-")
			res, err := parsers[tool](name)
			checkGolden(t, name, goldenText(res, err), "refused", "noh2", "garbage")
		})
	}
}

func sockperfMode(name string) string {
	if strings.Contains(name, "underload") {
		return "under-load"
	}
	return "ping-pong"
}

// TestToolCheck: a missing tool is ErrNotSupported naming it and its package.
func TestToolCheck(t *testing.T) {
	err := workload.Tool{Prog: "no-such-tool-spanperf", Pkg: "some-package"}.Check()
	if !errors.Is(err, testbed.ErrNotSupported) || !strings.Contains(err.Error(), "no-such-tool-spanperf") || !strings.Contains(err.Error(), "some-package") {
		t.Errorf("Check() = %v, want ErrNotSupported naming the tool and package", err)
	}
	if err := (workload.Tool{Prog: "sh", Pkg: "dash"}).Check(); err != nil {
		t.Errorf("sh: %v", err)
	}
}

// TestDriversEndToEnd runs every driver for real over native, vxlan and
// wireguard (kernel or wireguard-go).
func TestDriversEndToEnd(t *testing.T) {
	for _, dp := range []string{"native", "vxlan", "wireguard"} {
		t.Run(dp, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, dp, nil)
			run := func(t *testing.T, wl string, checker workload.Checker, p results.Params, d, warm time.Duration) *workload.Result {
				t.Helper()
				if err := checker.Check(t.Context()); errors.Is(err, testbed.ErrNotSupported) {
					t.Skip(err)
				}
				res, err := datapathtest.Run(tb, link, wl, p, d, warm)
				if err != nil {
					t.Fatalf("%s: %v", wl, err)
				}
				t.Logf("%s over %s: %v", wl, dp, res.Metrics)
				return res
			}
			t.Run("iperf3", func(t *testing.T) {
				r := run(t, "iperf3", workload.IPerf3{}, results.Params{"message_size": int64(65536), "streams": int64(2)}, time.Second, time.Second)
				m := r.Metrics
				if m[results.ThroughputBPS] < 50e6 || m[results.Bytes] < 50e6/8*0.9 {
					t.Errorf("throughput %.3g bit/s, bytes %.3g: want > 50 Mbit/s", m[results.ThroughputBPS], m[results.Bytes])
				}
				if s := r.Series[results.ThroughputBPS]; len(s.Values) != 1 {
					t.Errorf("series %+v, want one second (the omitted one left out)", s)
				}
			})
			t.Run("sockperf", func(t *testing.T) {
				r := run(t, "sockperf", workload.Sockperf{}, results.Params{"message_size": int64(64)}, time.Second, 0)
				m := r.Metrics
				checkLatencies(t, m, results.TransactionsPerS, 1000)
				if r.Histogram == "" {
					t.Error("no histogram from sockperf's full log")
				}
				// One message in flight: rate × mean round trip ≈ 1.
				if n := m[results.TransactionsPerS] * m[results.LatencyMean]; n < 0.5 || n > 1.05 {
					t.Errorf("rate × mean latency = %.2f, want about 1", n)
				}
				u := run(t, "sockperf", workload.Sockperf{}, results.Params{"mode": "under-load", "rate": float64(2000)}, time.Second, 0).Metrics
				if r := u[results.TransactionsPerS]; r < 1800 || r > 2200 {
					t.Errorf("under-load at 2000/s sent %.0f/s", r)
				}
			})
			t.Run("wrk", func(t *testing.T) {
				m := run(t, "wrk", workload.Wrk{}, results.Params{"connections": int64(4), "threads": int64(2), "body_size": int64(4096)}, time.Second, 0).Metrics
				checkLatencies(t, m, workload.MetricRequestsPerS, 1000)
				if m[workload.MetricErrors] != 0 {
					t.Errorf("%g errors", m[workload.MetricErrors])
				}
			})
			t.Run("h2load", func(t *testing.T) {
				r := run(t, "h2load", workload.H2load{}, results.Params{"connections": int64(4), "streams": int64(4), "body_size": int64(350)}, time.Second, 200*time.Millisecond)
				m := r.Metrics
				checkLatencies(t, m, workload.MetricRequestsPerS, 1000)
				if m[workload.MetricErrors] != 0 || r.Histogram == "" {
					t.Errorf("%g errors, histogram %d bytes", m[workload.MetricErrors], len(r.Histogram))
				}
			})
		})
	}
}

func checkLatencies(t *testing.T, m map[string]float64, rate string, minRate float64) {
	t.Helper()
	if m[rate] < minRate {
		t.Errorf("%s = %.0f, want ≥ %.0f", rate, m[rate], minRate)
	}
	p50, p99, max := m[results.LatencyP50], m[results.LatencyP99], m[results.LatencyMax]
	if !(p50 > 0 && p50 <= p99 && p99 <= max && max < 1) {
		t.Errorf("latency p50 %g p99 %g max %g: want 0 < p50 ≤ p99 ≤ max < 1 s", p50, p99, max)
	}
}
