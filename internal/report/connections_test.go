package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// connectionRecords: a relay whose RSS is 20 MiB + 50 KiB per connection
// (give or take a few KiB) at 1000, 4000 and 16000 connections, twice
// each, beside native (no process: no RSS) and one failed trial.
func connectionRecords() []results.Record {
	var recs []results.Record
	noise := []float64{-3000, 2500, 1000, -1500, 500, 0}
	for i, n := range []float64{1000, 4000, 16000, 1000, 4000, 16000} {
		idle := 20.0 * (1 << 20)
		m := map[string]float64{
			results.OpenConnections:                                    n,
			results.For(results.RSSBytesIdle, "relay@a"):               idle,
			results.For(results.RSSBytes, "relay@a"):                   idle + 50<<10*n + noise[i]*8,
			results.For(results.RSSBytesIdle, "relay@b"):               idle,
			results.For(results.RSSBytes, "relay@b"):                   idle,
			results.RSSBytesIdleDatapath:                               2 * idle,
			results.RSSBytesDatapath:                                   2*idle + 50<<10*n + noise[i]*8,
			results.RSSBytesAddedPerConnectionDatapath:                 (50<<10*n + noise[i]*8) / n,
			results.For(results.RSSBytesAddedPerConnection, "relay@a"): (50<<10*n + noise[i]*8) / n,
		}
		p := results.Params{"count": int64(n), "keepalive": "5s"}
		recs = append(recs, results.Record{Datapath: "relay", Workload: "connections", Params: p, Rep: i / 3, Metrics: m})
		recs = append(recs, results.Record{Datapath: "native", Workload: "connections", Params: p, Rep: i / 3,
			Metrics: map[string]float64{results.OpenConnections: n}})
	}
	recs = append(recs, results.Record{Datapath: "relay", Workload: "connections", Params: results.Params{"count": int64(32000), "keepalive": "5s"},
		Error: "connections: count 32000 is above what the datapath carries: HAProxy's maxconn 9900"})
	return recs
}

// TestConnectionFits: the fit reads the known 50 KiB per connection and
// the 20 MiB intercept, for the relay in a and over all processes; the
// idle relay in b reads 0; native, without RSS, and the failed trial
// give no fit.
func TestConnectionFits(t *testing.T) {
	fits := ConnectionFits(connectionRecords())
	if len(fits) != 3 {
		t.Fatalf("%d fits, want 3 (relay@a, relay@b, all processes): %+v", len(fits), fits)
	}
	want := []struct {
		comp             string
		slope, intercept float64
	}{{"relay@a", 50 << 10, 20 << 20}, {"relay@b", 0, 20 << 20}, {DatapathProcesses, 50 << 10, 40 << 20}}
	for i, w := range want {
		f := fits[i]
		if f.Datapath != "relay" || f.Component != w.comp || f.Params != "keepalive=5s" || f.Trials != 6 || len(f.Levels) != 3 {
			t.Errorf("fit %d: %+v, want relay %s over 6 trials at 3 levels", i, f, w.comp)
		}
		if math.Abs(f.Slope-w.slope) > 100 || math.Abs(f.Intercept-w.intercept) > 64<<10 {
			t.Errorf("%s: slope %.0f, intercept %.0f; want %.0f and %.0f", w.comp, f.Slope, f.Intercept, w.slope, w.intercept)
		}
		if w.slope > 0 && !(f.R2 > 0.9999) {
			t.Errorf("%s: r² %v, want ≈ 1", w.comp, f.R2)
		}
		if w.slope == 0 && !math.IsNaN(f.R2) {
			t.Errorf("%s: r² %v of a flat line, want NaN", w.comp, f.R2)
		}
	}
	two := ConnectionFits(connectionRecords()[:4]) // 1000 and 4000, once
	if len(two) == 0 || !math.IsNaN(two[0].R2) || math.Abs(two[0].Slope-50<<10) > 200 {
		t.Errorf("two levels once: %+v, want slope 50 KiB and no r²", two)
	}
	if one := ConnectionFits(connectionRecords()[:2]); len(one) != 0 {
		t.Errorf("one level: %+v, want no fit", one)
	}
}

// TestSummaryConnections: the summary shows the connections table and,
// below it, each component's bytes per connection.
func TestSummaryConnections(t *testing.T) {
	var b bytes.Buffer
	if err := Summary(&b, connectionRecords(), SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"open_connections", "rss_bytes_added_per_connection_datapath", "50.0 KiB [", "memory per open connection: rss_bytes_per_connection",
		"keepalive=5s  relay     relay@a          50.0 KiB          20.0 MiB   20.0 MiB  1.000  1.00k, 4.00k, 16.0k  6"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Run{{Dir: "run1", Records: connectionRecords()}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| keepalive=5s | relay | relay@a | 50.0 KiB | 20.0 MiB | 20.0 MiB | 1.000 | 1.00k, 4.00k, 16.0k | 6 |") {
		t.Errorf("markdown lacks the fit:\n%s", md.String())
	}
	var h bytes.Buffer
	if err := HTML(&h, []Run{{Dir: "run1", Records: connectionRecords()}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), "RSS vs open connections") {
		t.Errorf("the HTML report draws no RSS against open connections")
	}
}
