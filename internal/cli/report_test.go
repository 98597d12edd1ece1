package cli

import (
	"bytes"
	"os"
	"path/filepath"
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
	if code := Main([]string{"compare", old}, &out, &errb); code != 2 {
		t.Errorf("compare with one run exited %d, want 2", code)
	}
	if code := Main([]string{"compare", old, same, "--threshold", "x"}, &out, &errb); code != 2 {
		t.Errorf("compare with a bad threshold exited %d, want 2", code)
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
