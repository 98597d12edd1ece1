package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// linesRun is a run with known values: a sites sweep (2 and 3 sites) whose
// group costs repeat in every record of a group, a wan.delay sweep (0 and
// 5 ms one way), and tunnel-up and discovery records.
func linesRun() Run {
	var recs []results.Record
	add := func(wl, dp string, rep int, p results.Params, m map[string]float64) {
		recs = append(recs, results.Record{Workload: wl, Datapath: dp, Rep: rep, Params: p, Metrics: m})
	}
	for _, dp := range []string{"native", "vxlan"} {
		k := 1.0
		if dp == "vxlan" {
			k = 2
		}
		for rep := 0; rep < 3; rep++ {
			r := float64(rep)
			for _, n := range []int64{2, 3} {
				sites := float64(n)
				group := func() map[string]float64 {
					return map[string]float64{
						"datapath_setup_s":        k * sites * (0.1 + 0.01*r),
						"idle_cpu_cores_per_site": k * (0.2 + 0.1*r),
						"idle_rss_bytes_per_site": k * 1e6 * (1 + r),
					}
				}
				// Two workloads of one group: the group's costs count once.
				m := group()
				m[results.ThroughputBPS] = 1e9
				m[results.CPUSecondsPerGigabyte] = k * sites * (1 + r)
				add("stream", dp, rep, results.Params{"sites": n}, m)
				m = group()
				m[results.TransactionsPerS] = 1e4
				add("rr", dp, rep, results.Params{"sites": n}, m)
			}
			for _, d := range []string{"0s", "5ms"} {
				extra := 0.0
				if d == "5ms" {
					extra = 0.010
				}
				add("rr", dp, rep, results.Params{"wan.delay": d}, map[string]float64{
					results.TransactionsPerS: 1 / (k*1e-4 + extra + r*1e-5),
					results.LatencyP50:       k*1e-4 + extra + r*1e-5,
				})
			}
			add("tunnel-up", dp, rep, nil, map[string]float64{
				results.SetupSeconds: k * (0.01 + 0.001*r), results.TunnelUpSeconds: k * (0.02 + 0.001*r), results.TeardownSeconds: 0.005,
			})
			add("discovery", dp, rep, nil, map[string]float64{"discovery_s": k * (0.1 + 0.1*r), "first_connect_s": 0.05})
		}
	}
	return Run{Dir: "lines", Records: recs}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestLinesKnownPoints checks that each line's points are exactly the
// medians of the records at each x, with group costs counted once.
func TestLinesKnownPoints(t *testing.T) {
	sets := buildLines([]Run{linesRun()})
	find := func(metric, wl, xparam string) *lineSet {
		for i := range sets {
			if sets[i].metric == metric && sets[i].workload == wl && strings.Contains(sets[i].xLabel, xparam) {
				return &sets[i]
			}
		}
		t.Fatalf("no line of %s %s against %s; have %d sets", wl, metric, xparam, len(sets))
		return nil
	}
	check := func(c *lineSet, dp string, want map[float64]float64, wantN int) {
		t.Helper()
		for _, s := range c.series {
			if s.id.datapath != dp {
				continue
			}
			if len(s.points) != len(want) {
				t.Fatalf("%s %s: %d points, want %d", c.title, dp, len(s.points), len(want))
			}
			for _, p := range s.points {
				if !near(p.s.Median, want[p.x]) || p.s.N != wantN {
					t.Errorf("%s %s at x=%v: median %v of %d values, want %v of %d", c.title, dp, p.x, p.s.Median, p.s.N, want[p.x], wantN)
				}
			}
			return
		}
		t.Errorf("%s: no series %s", c.title, dp)
	}
	// Medians over reps 0,1,2 are the rep-1 values.
	check(find("datapath_setup_s", "", "sites"), "native", map[float64]float64{2: 2 * 0.11, 3: 3 * 0.11}, 3)
	check(find("datapath_setup_s", "", "sites"), "vxlan", map[float64]float64{2: 4 * 0.11, 3: 6 * 0.11}, 3)
	check(find("idle_cpu_cores_per_site", "", "sites"), "vxlan", map[float64]float64{2: 0.6, 3: 0.6}, 3)
	check(find("idle_rss_bytes_per_site", "", "sites"), "native", map[float64]float64{2: 2e6, 3: 2e6}, 3)
	check(find(results.CPUSecondsPerGigabyte, "stream", "sites"), "vxlan", map[float64]float64{2: 8, 3: 12}, 3)
	check(find(results.LatencyP50, "rr", "wan.delay"), "native", map[float64]float64{0: 1.1e-4, 0.010: 0.01011}, 3)
	check(find(results.TransactionsPerS, "rr", "wan.delay"), "vxlan", map[float64]float64{0: 1 / 2.1e-4, 0.010: 1 / 0.01021}, 3)
	if c := find(results.LatencyP50, "rr", "wan.delay"); c.xLabel != "RTT added by the WAN emulator (2 × wan.delay)" || c.xFmt(0.010) != "10.0 ms" {
		t.Errorf("RTT axis: label %q, 10 ms written %q", c.xLabel, c.xFmt(0.010))
	}

	rows := buildControlPlane([]Run{linesRun()})
	got := map[string]controlPlaneRow{}
	for _, r := range rows {
		got[r.id.datapath+" "+r.workload+" "+r.metric] = r
	}
	for key, want := range map[string]float64{
		"native tunnel-up setup_s": 0.011, "vxlan tunnel-up tunnel_up_s": 0.042, "native tunnel-up teardown_s": 0.005,
		"vxlan discovery discovery_s": 0.4, "native discovery first_connect_s": 0.05,
	} {
		r, ok := got[key]
		if !ok || !near(r.s.Median, want) {
			t.Errorf("control plane %s: p50 %v (present %v), want %v", key, r.s.Median, ok, want)
		}
	}
	// p90 of {0.2, 0.4, 0.6} interpolated: 0.56; p99: 0.596.
	if r := got["vxlan discovery discovery_s"]; !near(r.p90, 0.56) || !near(r.p99, 0.596) {
		t.Errorf("vxlan discovery p90 %v p99 %v, want 0.56 and 0.596", r.p90, r.p99)
	}
	if len(rows) != 2*(3+2) {
		t.Errorf("%d control-plane rows, want 10", len(rows))
	}
}

// TestLinesRendered checks that the HTML and Markdown reports carry the
// lines and the control-plane table.
func TestLinesRendered(t *testing.T) {
	runs := []Run{linesRun()}
	doc := renderHTML(t, runs, Options{})
	checkHTML(t, doc)
	for _, want := range []string{`id="lines"`, `id="control-plane"`, "datapath setup time vs number of sites",
		"latency p50 vs RTT · rr", "RTT added by the WAN emulator (2 × wan.delay)", "discovery_s", "tunnel_up_s"} {
		if !strings.Contains(doc, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	var md bytes.Buffer
	if err := Markdown(&md, runs, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Lines: cost against sites, rate against RTT",
		"**latency p50 vs RTT · rr** (x: RTT added by the WAN emulator (2 × wan.delay))",
		"| datapath | 0 | 10.0 ms |", "| native | 110 µs [100, 120] | 10.1 ms [10.1, 10.1] |",
		"| datapath | 2 | 3 |", "| vxlan | 440 ms [400, 480] | 660 ms [600, 720] |", "| native | 1.91 MiB [0.954, 2.86] | 1.91 MiB [0.954, 2.86] |",
		"## Control-plane timings", "| vxlan | discovery | (no params) | discovery_s | 3 | 400 ms | 560 ms | 596 ms | 600 ms |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md.String())
	}
}
