package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/report"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// mdTable returns the rows (cells by first cell) of the Markdown table
// that follows the line starting with heading.
func mdTable(t *testing.T, md, heading, also string) map[string][]string {
	t.Helper()
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, heading) || !strings.Contains(l, also) {
			continue
		}
		rows := map[string][]string{}
		for _, r := range lines[i+2:] {
			if r == "" && len(rows) > 0 {
				break
			}
			if !strings.HasPrefix(r, "|") {
				continue
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(r, "|"), " | ") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows[cells[0]] = cells[1:]
		}
		return rows
	}
	t.Fatalf("no %q … %q in the report:\n%s", heading, also, md)
	return nil
}

// TestReportLines runs a sites sweep (2 and 3) crossed with a delay sweep
// (0 and 5 ms one way) through native, then reports it: the Markdown has a
// line of setup time against the number of sites, a line of rr's p50
// against the added RTT (0 and 10 ms) whose points are the medians of the
// records, and the control-plane table; the HTML draws the lines.
func TestReportLines(t *testing.T) {
	requireRoot(t)
	src := `name: lines
sites: [2, 3]
datapaths: [native]
wan: {delay: [0s, 5ms], emulator: userspace}
workloads:
  - type: rr
  - type: tunnel-up
repetitions: 3
duration: 1s
warmup: 200ms
`
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, errOut, code := spanperf(t, "run", "-f", p, "--out", dir); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	md, errOut, code := spanperf(t, "report", dir, "--format", "md")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, errOut)
	}
	median := func(wl, metric string, keep func(results.Params) bool) float64 {
		var vs []float64
		for _, r := range recs {
			if v, ok := r.Metrics[metric]; ok && r.Workload == wl && r.Error == "" && keep(r.Params) {
				vs = append(vs, v)
			}
		}
		return stats.Summarize(vs).Median
	}

	for _, sites := range []float64{2, 3} {
		rows := mdTable(t, md, "**latency p50 vs RTT · rr", " sites="+results.FormatValue(sites)+"**")
		got := rows["native"]
		if len(got) != 2 {
			t.Fatalf("sites=%v: rr p50 line %v, want two points", sites, got)
		}
		for i, d := range []string{"0s", "5ms"} {
			want := median("rr", results.LatencyP50, func(p results.Params) bool {
				return p[results.WANDelayParam] == d && p["sites"] == sites
			})
			if !strings.HasPrefix(got[i], report.FormatValue(results.LatencyP50, want)+" [") {
				t.Errorf("sites=%v delay %s: point %q, want the records' median %s", sites, d, got[i], report.FormatValue(results.LatencyP50, want))
			}
		}
	}
	// Setup time against sites: one value per (repetition, sites) group,
	// which rr and tunnel-up records both carry.
	rows := mdTable(t, md, "**datapath setup time vs number of sites**", "")
	for i, sites := range []float64{2, 3} {
		var vs []float64
		seen := map[int]bool{}
		for _, r := range recs {
			v, ok := r.Metrics["datapath_setup_s"]
			if ok && r.Params["sites"] == sites && !seen[r.Rep] {
				seen[r.Rep] = true
				vs = append(vs, v)
			}
		}
		want := report.FormatValue("datapath_setup_s", stats.Summarize(vs).Median)
		if len(rows["native"]) != 2 || !strings.HasPrefix(rows["native"][i], want+" [") {
			t.Errorf("setup line %v, want %s at %v sites", rows["native"], want, sites)
		}
	}
	if cp := mdTable(t, md, "Percentiles over the successful trials", ""); len(cp) == 0 {
		t.Error("no control-plane rows")
	}
	if !strings.Contains(md, "| native | tunnel-up | interval=1ms sites=2 timeout=30s wan.delay=0s | tunnel_up_s | 3 |") {
		t.Errorf("control-plane table lacks native tunnel_up_s at sites=2, delay 0:\n%s", md)
	}
	html, errOut, code := spanperf(t, "report", dir, "--format", "html")
	if code != 0 {
		t.Fatalf("report html: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"latency p50 vs RTT · rr", "datapath setup time vs number of sites", `id="control-plane"`} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
}
