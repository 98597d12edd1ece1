package scenario

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizingCells(t *testing.T) {
	for _, tc := range []struct{ src, want, err string }{
		{"datapaths: [native]\nworkloads: [{type: rr}]\n", "", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: mean-max\n", "mean-max", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: p50-p99\n", "p50-p99", ""},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nsizing_cells: avg\n", "", `s.yaml:3: sizing_cells: "avg": want one of p50-p99, mean-max`},
	} {
		s, err := Parse("s.yaml", []byte(tc.src), fakeCatalog{})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.src, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case s.SizingCells != tc.want:
			t.Errorf("%q: sizing_cells %q, want %q", tc.src, s.SizingCells, tc.want)
		}
	}
}

// limits.KEY.workloads restricts a limit to some workload types: the others
// run each point once, unlimited, on every datapath. A type the scenario
// does not run is an error naming the file, line and key.
func TestLimitsForSomeWorkloads(t *testing.T) {
	const src = `datapaths: [native, relay]
workloads:
  - {type: rr, concurrency: [1, 8]}
  - {type: stream}
limits: {relay: {cpu: [0.5, 1], workloads: [rr]}}
`
	s, err := Parse("test.yaml", []byte(src), componentCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Limits["relay"].Workloads; len(got) != 1 || got[0] != "rr" {
		t.Errorf("workloads %q, want [rr]", got)
	}
	n := map[string]int{}
	for _, p := range s.PointsOf("relay") {
		_, limited := p.Params["limit.relay.cpu"]
		if limited != (p.Workload == "rr") {
			t.Errorf("%s %s: limited %v", p.Workload, p.Params.Key(), limited)
		}
		n[p.Workload]++
	}
	if n["rr"] != 4 || n["stream"] != 1 {
		t.Errorf("relay's points %v, want rr 4 (2 × 2 limits) and stream 1", n)
	}
	if got := len(s.PointsOf("native")); got != 3 {
		t.Errorf("native's points: %d, want 3", got)
	}
	bad := strings.Replace(src, "workloads: [rr]", "workloads: [rr, http]", 1)
	_, err = Parse("test.yaml", []byte(bad), componentCatalog{})
	if err == nil || !strings.Contains(err.Error(), `test.yaml:5: limits.relay.workloads[1]: "http" is not a workload of the scenario (rr, stream)`) {
		t.Errorf("http: err %v", err)
	}
}

// summary_metrics lists metric names for the summary; a name of the wrong
// form or a duplicate is an error naming the file, line and element.
func TestParseSummaryMetrics(t *testing.T) {
	const head = "datapaths: [native]\nworkloads: [{type: rr}]\n"
	for _, tc := range []struct {
		src  string
		want []string
		err  string
	}{
		{head + "summary_metrics: [latency_p50_s, latency_p90_s, 'cpu_cores{relay@b}']\n", []string{"latency_p50_s", "latency_p90_s", "cpu_cores{relay@b}"}, ""},
		{head + "summary_metrics: latency_p999_s\n", []string{"latency_p999_s"}, ""},
		{head + "summary_metrics:\n  - latency_p50_s\n  - Latency P90\n", nil, `s.yaml:5: summary_metrics[1]: "Latency P90" is not a metric name`},
		{head + "summary_metrics: [latency_p50_s, latency_p50_s]\n", nil, `s.yaml:3: summary_metrics[1]: duplicate metric "latency_p50_s"`},
	} {
		s, err := Parse("s.yaml", []byte(tc.src), fakeCatalog{})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.src, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case !slices.Equal(s.SummaryMetrics, tc.want):
			t.Errorf("%q: summary_metrics %q, want %q", tc.src, s.SummaryMetrics, tc.want)
		}
	}
}
