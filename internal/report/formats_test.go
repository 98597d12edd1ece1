package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// recordedRun is testRecords as a run directory would hold them, with the
// energy probe's marks: RAPL missing, energy estimated.
func recordedRun(dir string) Run {
	recs := testRecords()
	for i := range recs {
		if recs[i].Error == "" {
			recs[i].Metrics[results.EnergyJoules] = 10 + float64(i)
			recs[i].Metrics[results.EnergyEstimated] = 1
			recs[i].Missing = map[string]string{results.EnergyRAPL: "no RAPL: estimated from CPU time"}
		}
	}
	return Run{Dir: dir, Records: recs, Manifest: results.Manifest{
		Run: "r1", Version: "0.1.0-test", ScenarioFile: "examples/quick.yaml",
		Host:  results.Host{Hostname: "box", Kernel: "6.1.0", CPUModel: "Test CPU", Cores: 4},
		Start: time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)}}
}

// checkGolden compares got with testdata/name, rewriting it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestFormatsGolden(t *testing.T) {
	one := []Run{recordedRun("runs/r1")}
	two := []Run{recordedRun("runs/r1"), recordedRun("other/r2")}
	for _, tc := range []struct {
		golden string
		render func(w *bytes.Buffer, runs []Run) error
		runs   []Run
	}{
		{"report.md.golden", func(w *bytes.Buffer, r []Run) error { return Markdown(w, r, Options{}) }, one},
		{"report_two.md.golden", func(w *bytes.Buffer, r []Run) error { return Markdown(w, r, Options{Baseline: "vxlan"}) }, two},
		{"report.csv.golden", func(w *bytes.Buffer, r []Run) error { return CSV(w, r, Options{}) }, one},
		{"report.json.golden", func(w *bytes.Buffer, r []Run) error { return JSON(w, r, Options{}) }, one},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.render(&buf, tc.runs); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, buf.Bytes())
		})
	}
}

func TestFormatsErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Markdown(&buf, nil, Options{}); err == nil {
		t.Error("Markdown of no runs: no error")
	}
	if err := JSON(&buf, []Run{recordedRun("r")}, Options{Baseline: "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("JSON with unknown baseline: %v", err)
	}
	if err := CSV(&buf, nil, Options{}); err == nil {
		t.Error("CSV of no runs: no error")
	}
}

// TestShippedReference loads the reference figures shipped in examples and
// shows them beside a recorded run, labelled as a different testbed.
func TestShippedReference(t *testing.T) {
	ref, err := ReadReferenceFile(filepath.Join("..", "..", "examples", "reference", "icpe25.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ref) < 100 {
		t.Fatalf("read %d reference rows, want the whole study", len(ref))
	}
	runs := []Run{recordedRun("runs/r1")}
	var md bytes.Buffer
	if err := Markdown(&md, runs, Options{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	label := "**reference: ICPE 2025 (Malleni, Castillo Lema, Bauer, Sevilla Canavate), doi:10.1145/3676151.3719352 (different testbed)**"
	streamAt := strings.Index(out, "## stream")
	rrAt := strings.Index(out, "## rr")
	if streamAt < 0 || rrAt < 0 {
		t.Fatalf("report lacks workload sections:\n%s", out)
	}
	// The TCP_STREAM figures sit in the stream section, TCP_RR in rr.
	sec := out[streamAt:]
	if next := strings.Index(sec[1:], "\n## "); next >= 0 {
		sec = sec[:next+1]
	}
	if !strings.Contains(sec, label) || !strings.Contains(sec, "| Skupper | TCP_STREAM | 64 | 1 | throughput | 0.7 Gbit/s |") {
		t.Errorf("stream section lacks the labelled reference figures:\n%s", sec)
	}
	if !strings.Contains(out, "## HTTP/1.1 10k rps 1024 B (reference only)") {
		t.Errorf("report lacks the reference-only HTTP section")
	}
	var js bytes.Buffer
	if err := JSON(&js, runs, Options{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"label": "reference: ICPE 2025`) {
		t.Errorf("json lacks the reference label")
	}
}

func TestParseReferenceErrors(t *testing.T) {
	const header = "source,datapath,workload,message_size,threads,metric,value,unit\n"
	for _, tc := range []struct{ in, want string }{
		{"", "f.csv:1: empty file"},
		{"source,datapath,workload,threads,metric,value\n", "f.csv:1: message_size: missing column"},
		{header + "s,d,w,64,1,m,abc,u\n", "f.csv:2: value: \"abc\" is not a number"},
		{header + "s,d,w,64,1,m,1,u\ns,d,w,x,1,m,1,u\n", "f.csv:3: message_size: \"x\" is not a whole number"},
		{header + "s,,w,64,1,m,1,u\n", "f.csv:2: datapath: empty"},
		{header + "s,d,w,64,1,m,1\n", "f.csv:2: 7 fields, header has 8"},
		{header + "\"s,d,w,64,1,m,1,u\n", "f.csv:2: column"},
		{header, "f.csv: no reference rows"},
	} {
		_, err := ParseReference("f.csv", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseReference(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	rows, err := ParseReference("f.csv", strings.NewReader("value,metric,workload,datapath,source,threads,message_size\n1.5,m,w,d,s,,\n"))
	if err != nil || len(rows) != 1 || rows[0].Value != 1.5 || rows[0].Unit != "" || rows[0].Line != 2 {
		t.Errorf("reordered columns without unit: %+v, %v", rows, err)
	}
}
