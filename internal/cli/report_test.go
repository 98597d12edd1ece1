package cli

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// writeRun makes a run directory of fixed records: native and vxlan,
// stream, 5 repetitions, vxlan's throughput scaled by vxlanScale.
func writeRun(t *testing.T, name string, vxlanScale float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	d, err := results.Create(dir, results.Manifest{Run: name, Start: time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	base := []float64{9.40e9, 9.43e9, 9.38e9, 9.45e9, 9.41e9}
	trial := 0
	for _, dp := range []string{"native", "vxlan"} {
		for rep, v := range base {
			if dp == "vxlan" {
				v *= 0.8 * vxlanScale
			}
			r := results.Record{Run: name, Trial: trial, Datapath: dp, Workload: "stream",
				Params: results.Params{"message_size": int64(131072)}, Rep: rep,
				Metrics: map[string]float64{results.ThroughputBPS: v, results.LatencyP50: 1e-4 + float64(rep)*1e-6}}
			if err := d.Append(r); err != nil {
				t.Fatal(err)
			}
			trial++
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompareExitStatus(t *testing.T) {
	old := writeRun(t, "old", 1)
	same := writeRun(t, "same", 1)
	slower := writeRun(t, "slower", 0.8) // vxlan 20% lower throughput

	var out, errb bytes.Buffer
	if code := Main([]string{"compare", old, same}, &out, &errb); code != 0 {
		t.Errorf("compare of identical data exited %d:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "no significant change") || strings.Contains(out.String(), "! worse") {
		t.Errorf("compare of identical data:\n%s", out.String())
	}

	out.Reset()
	errb.Reset()
	if code := Main([]string{"compare", old, slower, "--threshold", "5%"}, &out, &errb); code != 1 {
		t.Errorf("compare of a 20%% regression exited %d, want 1:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "! worse") || !strings.Contains(out.String(), "-20.0%") {
		t.Errorf("compare does not show the regression:\n%s", out.String())
	}

	// Above the threshold nothing fails.
	out.Reset()
	if code := Main([]string{"compare", "--threshold", "25%", old, slower}, &out, &errb); code != 0 {
		t.Errorf("compare with threshold 25%% exited %d, want 0:\n%s", code, out.String())
	}
}

// writeTrials makes a run directory with manifest m and, per datapath (in
// name order), one rr record per entry: its metrics, or a failed trial
// for nil.
func writeTrials(t *testing.T, name string, m results.Manifest, trials map[string][]map[string]float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	m.Run = name
	d, err := results.Create(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n := 0
	for _, dp := range slices.Sorted(maps.Keys(trials)) {
		for rep, metrics := range trials[dp] {
			r := results.Record{Run: name, Trial: n, Datapath: dp, Workload: "rr",
				Params: results.Params{"concurrency": int64(1)}, Rep: rep, Metrics: metrics}
			if metrics == nil {
				r.Error = "server: connect: connection refused"
			}
			if err := d.Append(r); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return dir
}

// TestCompareGate runs the compare command over synthetic runs of 3
// repetitions, the default, and checks its exit status.
func TestCompareGate(t *testing.T) {
	rr := func(tps, p99, errs, sustained float64) map[string]float64 {
		return map[string]float64{results.TransactionsPerS: tps, results.LatencyP99: p99, "errors": errs, results.Sustained: sustained}
	}
	good := []map[string]float64{rr(10000, 1e-3, 0, 1), rr(10100, 1.1e-3, 0, 1), rr(9900, 1.05e-3, 0, 1)}
	with := func(f func(i int, m map[string]float64)) []map[string]float64 {
		var out []map[string]float64
		for i, m := range good {
			c := maps.Clone(m)
			f(i, c)
			out = append(out, c)
		}
		return out
	}
	man := results.Manifest{Version: "v1", Host: results.Host{Hostname: "ci", Cores: 2},
		Scenario: json.RawMessage(`{"duration":2000000000,"warmup":1000000000}`)}
	old := writeTrials(t, "old", man, map[string][]map[string]float64{"native": good, "vxlan": good})
	for _, tc := range []struct {
		name string
		new  map[string][]map[string]float64
		man  results.Manifest
		args []string
		code int
		want []string
	}{
		{"identical", map[string][]map[string]float64{"native": good, "vxlan": good}, man, nil, 0,
			[]string{"0 regressions", "0 likely worse"}},
		{"halved tps", map[string][]map[string]float64{"native": good, "vxlan": with(func(_ int, m map[string]float64) {
			m[results.TransactionsPerS] /= 2
		})}, man, nil, 2, []string{"vxlan     transactions_per_s", "-50.0%", "? likely worse, too few repetitions to test",
			"n=3+3: p cannot go below 0.1, need p < 0.05; every new value is worse than every old one by more than 5%"}},
		{"halved tps allowed", map[string][]map[string]float64{"native": good, "vxlan": with(func(_ int, m map[string]float64) {
			m[results.TransactionsPerS] /= 2
		})}, man, []string{"--allow-inconclusive"}, 0, []string{"1 likely worse"}},
		{"halved tps over the threshold", map[string][]map[string]float64{"native": good, "vxlan": with(func(_ int, m map[string]float64) {
			m[results.TransactionsPerS] /= 2
		})}, man, []string{"--threshold", "60%"}, 0, []string{"too few repetitions"}},
		{"datapath failed", map[string][]map[string]float64{"native": good, "vxlan": {nil, nil, nil}}, man, nil, 1,
			[]string{"vxlan     trials", "0/3 failed", "3/3 failed", "! vanished", "every new trial failed: server: connect: connection refused"}},
		{"datapath absent", map[string][]map[string]float64{"native": good}, man, nil, 1, []string{"absent", "! vanished"}},
		{"one trial failed", map[string][]map[string]float64{"native": good, "vxlan": {good[0], good[1], nil}}, man, nil, 1,
			[]string{"1/3 failed", "! more failures"}},
		{"metric vanished", map[string][]map[string]float64{"native": good, "vxlan": with(func(_ int, m map[string]float64) {
			delete(m, results.LatencyP99)
		})}, man, nil, 1, []string{"latency_p99_s", "! vanished"}},
		{"more errors", map[string][]map[string]float64{"native": good, "vxlan": with(func(i int, m map[string]float64) {
			m["errors"] = float64(i % 2)
		})}, man, nil, 1, []string{"! more failures", "trials with errors: 0/3 old, 1/3 new"}},
		{"sustained falls", map[string][]map[string]float64{"native": good, "vxlan": with(func(i int, m map[string]float64) {
			m[results.Sustained] = 0
		})}, man, nil, 1, []string{"! more failures", "trials not sustained: 0/3 old, 3/3 new"}},
		{"other host", map[string][]map[string]float64{"native": good, "vxlan": good},
			results.Manifest{Version: "v2", Host: results.Host{Hostname: "laptop", Cores: 8},
				Scenario: json.RawMessage(`{"duration":1000000000,"warmup":1000000000}`)}, nil, 0,
			[]string{"warning: the runs ran on different hosts: hostname ci → laptop, cores 2 → 8\n",
				"warning: the runs' duration differs: 2s → 1s\n", "warning: the runs were made by different spanperf versions: v1 → v2\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			new := writeTrials(t, "new", tc.man, tc.new)
			var out, errb bytes.Buffer
			code := Main(append([]string{"compare", old, new}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.code == 2 && !strings.Contains(errb.String(), "inconclusive") {
				t.Errorf("stderr does not say inconclusive: %q", errb.String())
			}
		})
	}
}

func TestCompareUsage(t *testing.T) {
	old := writeRun(t, "old", 1)
	failed := writeTrials(t, "failed", results.Manifest{}, map[string][]map[string]float64{"native": {nil, nil}})
	for _, args := range [][]string{
		{"compare", old},
		{"compare", old, old, "--threshold", "x"},
		{"compare", old, old, "--nope"},
		{"compare", old, filepath.Join(t.TempDir(), "missing")},
		{"compare", failed, old},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 3 {
			t.Errorf("%v exited %d, want 3\n%s%s", args[1:], code, out.String(), errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%v: nothing on stderr", args[1:])
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"compare", "--help"}, &out, &errb); code != 0 {
		t.Errorf("compare --help exited %d", code)
	}
	for _, want := range []string{"Exit status:", "  0  no regression", "  1  regression", "  2  inconclusive", "  3  bad usage",
		"Benjamini–Hochberg", "-allow-inconclusive"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("compare --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReportFormats(t *testing.T) {
	a, b := writeRun(t, "a", 1), writeRun(t, "b", 0.8)
	for _, tc := range []struct {
		format, want string
	}{
		{"md", "| params | datapath | a: throughput_bps |"},
		{"csv", "run,datapath,workload,params,rep,trial,metric,value,unit,error\n"},
		{"json", `"summaries": [`},
	} {
		var out, errb bytes.Buffer
		if code := Main([]string{"report", a, b, "--format", tc.format}, &out, &errb); code != 0 {
			t.Fatalf("report --format %s exited %d: %s", tc.format, code, errb.String())
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("report --format %s lacks %q:\n%s", tc.format, tc.want, out.String())
		}
	}
	file := filepath.Join(t.TempDir(), "r.md")
	ref := filepath.Join("..", "..", "examples", "reference", "icpe25.csv")
	var out, errb bytes.Buffer
	if code := Main([]string{"report", a, "-o", file, "--reference", ref, "--baseline", "vxlan"}, &out, &errb); code != 0 {
		t.Fatalf("report -o exited %d: %s", code, errb.String())
	}
	got, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(got), "(different testbed)") || !strings.Contains(string(got), "against vxlan") {
		t.Errorf("report file: %v\n%s", err, got)
	}
	for _, args := range [][]string{{"report"}, {"report", a, "--format", "pdf"}} {
		if code := Main(args, &out, &errb); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("source,datapath\n"), 0o644)
	errb.Reset()
	if code := Main([]string{"report", a, "--reference", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bad.csv:1: workload: missing column") {
		t.Errorf("bad reference: exit %d, %s", code, errb.String())
	}
}
