package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// loadTestRuns loads the recorded runs in testdata/html: a subset of a seeds
// run (three datapaths, stream, rr and crr, with histograms) and a quick run
// with the CPU and energy probes.
func loadTestRuns(t *testing.T) (seeds, quick Run) {
	t.Helper()
	var err error
	if seeds, err = LoadRun(filepath.Join("testdata", "html", "seeds")); err != nil {
		t.Fatal(err)
	}
	if quick, err = LoadRun(filepath.Join("testdata", "html", "quick")); err != nil {
		t.Fatal(err)
	}
	return seeds, quick
}

var (
	svgRe     = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)
	drawnRe   = regexp.MustCompile(`<rect class="bar"|<polyline class="series"|<polygon class="series"|<circle`)
	urlAttrRe = regexp.MustCompile(`(?i)\b(src|href|xlink:href|action|data)\s*=\s*["']?\s*(https?:)?//`)
)

// checkHTML asserts what every report must hold: every chart draws
// something, nothing is fetched from the network, no script.
func checkHTML(t *testing.T, doc string) {
	t.Helper()
	svgs := svgRe.FindAllString(doc, -1)
	if len(svgs) == 0 {
		t.Fatal("no <svg> in the report")
	}
	for i, s := range svgs {
		if !drawnRe.MatchString(s) {
			t.Errorf("svg %d draws nothing: %.300s", i, s)
		}
	}
	if m := urlAttrRe.FindString(doc); m != "" {
		t.Errorf("report fetches from the network: %q", m)
	}
	rest := strings.ReplaceAll(doc, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, scheme := range []string{"http://", "https://"} {
		if i := strings.Index(rest, scheme); i >= 0 {
			t.Errorf("report contains %q outside the SVG namespace: %q", scheme, rest[max(0, i-80):min(len(rest), i+80)])
		}
	}
	if strings.Contains(strings.ToLower(doc), "<script") {
		t.Error("report contains a script")
	}
	if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf\"") {
		t.Error("report contains a non-finite number")
	}
}

func renderHTML(t *testing.T, runs []Run, opts Options) string {
	t.Helper()
	var buf bytes.Buffer
	if err := HTML(&buf, runs, opts); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestHTMLRecordedRun(t *testing.T) {
	seeds, quick := loadTestRuns(t)
	doc := renderHTML(t, []Run{seeds}, Options{})
	checkHTML(t, doc)
	for _, want := range []string{
		"<title>spanperf report</title>",
		"What was run", "kernel 6.18.44-fc-v769", "AMD EPYC", "0.1.0-dev", "2s measured, after 1s warmup",
		"covers the median with 75% confidence",
		"Normalized overview", overviewRule[:40],
		"Workload stream", "Workload rr", "Workload crr",
		"throughput vs message size", "latency percentiles", "latency percentile curve",
		"per-second series", "overhead vs baseline", "against native",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(doc, "<svg"); n < 15 {
		t.Errorf("%d charts, want at least 15", n)
	}

	doc = renderHTML(t, []Run{quick}, Options{Baseline: "vxlan", Title: "quick <run>"})
	checkHTML(t, doc)
	for _, want := range []string{
		"<title>quick &lt;run&gt;</title>", "CPU per component", "efficiency", "joules per gigabyte", "(estimated)",
		"est.", "energy is estimated", "against vxlan", "throughput per core",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("quick report lacks %q", want)
		}
	}
}

func TestHTMLSeveralRuns(t *testing.T) {
	seeds, quick := loadTestRuns(t)
	doc := renderHTML(t, []Run{seeds, quick}, Options{})
	checkHTML(t, doc)
	for _, want := range []string{"native (seeds)", "native (quick)", "vxlan (quick)", "wireguard (seeds)", "against native in quick"} {
		if !strings.Contains(doc, want) {
			t.Errorf("report of two runs lacks %q", want)
		}
	}
}

// warningRecords is a small run with one failed trial, a probe that did
// not measure, high variance and two repetitions.
func warningRecords() []results.Record {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var recs []results.Record
	for _, dp := range []string{"native", "wg"} {
		for rep, v := range []float64{1e9, 2e9} {
			r := results.Record{Run: "r1", Datapath: dp, Workload: "stream", Rep: rep, Start: t0, End: t0.Add(time.Second),
				Params:  results.Params{"message_size": float64(1024)},
				Metrics: map[string]float64{results.ThroughputBPS: v},
				Series:  map[string]results.Series{results.ThroughputBPS: {Interval: 1, Values: []float64{v, v * 0.9, v}}},
			}
			if dp == "wg" && rep == 1 {
				r.Error = "tunnel <down>"
				r.Metrics = nil
			}
			if dp == "wg" && rep == 0 {
				r.Missing = map[string]string{"cpu_cores": "no cgroup"}
			}
			recs = append(recs, r)
		}
	}
	return recs
}

func TestHTMLWarnings(t *testing.T) {
	doc := renderHTML(t, []Run{{Dir: "runs/small", Records: warningRecords()}}, Options{})
	checkHTML(t, doc)
	for _, want := range []string{
		"2 repetitions: fewer than 3",
		"1 trials failed",
		"wg msg=1024: 1 of 2 trials failed: tunnel &lt;down&gt;",
		"wg msg=1024: cpu_cores not measured: no cgroup",
		"native msg=1024: throughput varies: cv=47% (above 10%)",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestHTMLGolden(t *testing.T) {
	doc := renderHTML(t, []Run{{Dir: "runs/small", Records: warningRecords()}}, Options{})
	golden := filepath.Join("testdata", "html_small.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if doc != string(want) {
		t.Errorf("HTML differs from %s (go test -update rewrites it)", golden)
	}
}

func TestHTMLNoRecords(t *testing.T) {
	if err := HTML(&bytes.Buffer{}, nil, Options{}); err == nil {
		t.Error("HTML of no runs succeeded")
	}
	if err := HTML(&bytes.Buffer{}, []Run{{Dir: "x"}}, Options{}); err == nil {
		t.Error("HTML of a run without records succeeded")
	}
}

func TestHTMLSizingAndReference(t *testing.T) {
	var recs []results.Record
	for _, rate := range []float64{1000, 2000} {
		for _, limit := range []float64{0.5, 1} {
			recs = append(recs, results.Record{Datapath: "relay", Workload: "rr", Params: results.Params{RateParam: rate, results.CPULimitParam("relay"): limit},
				Metrics: map[string]float64{results.TransactionsPerS: rate, results.LatencyP50: 1e-4 / limit, results.LatencyP99: 1e-3 / limit}})
		}
	}
	ref := []ReferenceRow{{Source: "ICPE 2025 <study>", Datapath: "skupper", Workload: "TCP_STREAM", MessageSize: 1024, Metric: "throughput", Value: 1.5, Unit: "Gbit/s"}}
	doc := renderHTML(t, []Run{{Dir: "runs/sizing", Records: recs}}, Options{Reference: ref})
	checkHTML(t, doc)
	for _, want := range []string{"<h2 id=\"sizing\">Sizing</h2>", "sizing: relay rr", "Reference figures", "ICPE 2025 &lt;study&gt;", "TCP_STREAM", "different testbed"} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
