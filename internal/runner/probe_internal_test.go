package runner

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

func TestAddProbeDerivesEfficiency(t *testing.T) {
	s := &scenario.Scenario{Duration: 10 * time.Second}
	daemons := []results.Component{{Name: "wireguard-go@a", PID: 10}, {Name: "wireguard-go@b", PID: 11}}
	kernel := []results.Component{{Name: "kernel", Role: "kernel"}}
	type m = map[string]float64
	for _, c := range []struct {
		name        string
		comps       []results.Component
		workload    m
		probe       m
		probeMiss   map[string]string
		probeErr    error
		want        m
		wantMissing map[string]string // reason substrings
		absent      []string
		warn        string // substring of the one warning; "" for none
		foreign     []probe.ProcessCPU
	}{
		{
			name:  "daemons, stream: per path core, CPU-seconds per GB",
			comps: daemons,
			workload: m{results.ThroughputBPS: 700e6, results.Bytes: 875e6, results.DurationS: 10,
				results.CPUSecondsClient: 2, results.CPUSecondsServer: 3},
			probe: m{results.CPUCoresDatapath: 1.4, results.CPUCoresSoftirq: 0.2, results.CPUCoresPath: 1.75,
				results.CPUCoresForeign: 0.05, results.EnergyJoules: 140},
			want: m{results.CPUCoresGenerator: 0.5, results.ThroughputBPSPerCore: 700e6 / 1.75,
				results.CPUSecondsPerGigabyte: 1.75 * 10 / 0.875, // 20 CPU-s per GB
				results.JoulesPerGigabyte:     160, results.CPUCoresDatapath: 1.4},
			absent: []string{results.TransactionsPerSPerCore, results.ConnectionsPerSPerCore, results.CPUMicrosPerTransaction},
		},
		{
			name:     "kernel only, rr: per path core, µs per transaction",
			comps:    kernel,
			workload: m{results.TransactionsPerS: 24000, results.CPUSecondsClient: 3, results.CPUSecondsServer: 4},
			probe:    m{results.CPUCoresSoftirq: 0.4, results.CPUCoresPath: 1.2, results.EnergyJoules: 90},
			want:     m{results.TransactionsPerSPerCore: 20000, results.CPUMicrosPerTransaction: 50, results.CPUCoresGenerator: 0.7},
			absent:   []string{results.ThroughputBPSPerCore, results.JoulesPerGigabyte, results.CPUCoresDatapath, results.CPUSecondsPerGigabyte},
		},
		{
			name:     "crr: per connection; foreign load warns",
			comps:    kernel,
			workload: m{results.ConnectionsPerS: 8000, results.CPUSecondsClient: 3, results.CPUSecondsServer: 4},
			probe:    m{results.CPUCoresPath: 1.6, results.CPUCoresForeign: 0.43},
			want:     m{results.ConnectionsPerSPerCore: 5000, results.CPUMicrosPerTransaction: 200},
			foreign: []probe.ProcessCPU{{PID: 5, Comm: "cc1", Cores: 0.05}, {PID: 3, Comm: "go", Cores: 0.2},
				{PID: 4, Comm: "cc1", Cores: 0.1}, {PID: 6, Comm: "sh", Cores: 0.05}, {PID: 7, Comm: "gzip", Cores: 0.03}},
			warn: "foreign CPU: 0.43 cores of processes not in the run (go 0.20, cc1 0.15, sh 0.05, …) shared the machine",
		},
		{
			name:     "http: per request",
			comps:    kernel,
			workload: m{"requests_per_s": 4000, results.CPUSecondsClient: 3, results.CPUSecondsServer: 4},
			probe:    m{results.CPUCoresPath: 1, results.CPUCoresForeign: 0.1},
			want:     m{results.CPUMicrosPerTransaction: 250},
			absent:   []string{results.TransactionsPerSPerCore},
		},
		{
			name:     "path 0",
			comps:    kernel,
			workload: m{results.ConnectionsPerS: 9000, results.CPUSecondsClient: 3},
			probe:    m{results.CPUCoresPath: 0},
			wantMissing: map[string]string{
				results.ConnectionsPerSPerCore:  "cpu_cores_path measured 0",
				results.CPUMicrosPerTransaction: "cpu_cores_path measured 0",
				results.CPUCoresGenerator:       "did not report its server CPU",
			},
		},
		{
			name:      "path not measured",
			comps:     daemons,
			workload:  m{results.ThroughputBPS: 700e6, results.Bytes: 875e6, results.CPUSecondsClient: 2, results.CPUSecondsServer: 3},
			probe:     m{results.CPUCoresSoftirq: 0.2, results.CPUCoresDatapath: 1},
			probeMiss: map[string]string{results.CPUCoresPath: "cpu_cores_busy: /proc/stat: gone", results.EnergyJoules: "no RAPL, and no CPU time"},
			wantMissing: map[string]string{
				results.ThroughputBPSPerCore:  "cpu_cores_path: cpu_cores_busy: /proc/stat: gone",
				results.CPUSecondsPerGigabyte: "cpu_cores_path: cpu_cores_busy",
				results.JoulesPerGigabyte:     "energy_joules: no RAPL",
			},
		},
		{
			name:     "probe failed to start",
			comps:    daemons,
			workload: m{results.ThroughputBPS: 1e9, results.CPUSecondsClient: 2, results.CPUSecondsServer: 3},
			probeErr: errors.New("bad spec"),
			wantMissing: map[string]string{
				results.CPUCoresDatapath:     "probe: bad spec",
				results.ThroughputBPSPerCore: "cpu_cores_path: probe: bad spec",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := results.Record{Metrics: m{}}
			for k, v := range c.workload {
				rec.Metrics[k] = v
			}
			pd := &probed{comps: c.comps, s: s, err: c.probeErr, res: probe.Result{Metrics: c.probe, Missing: c.probeMiss, Foreign: c.foreign}}
			pd.addTo(&rec)
			for k, v := range c.want {
				if got, ok := rec.Metrics[k]; !ok || math.Abs(got-v) > 1e-9*math.Abs(v) {
					t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
				}
			}
			for k, v := range c.wantMissing {
				if !strings.Contains(rec.Missing[k], v) {
					t.Errorf("missing[%s] = %q, want it to say %q", k, rec.Missing[k], v)
				}
				if _, ok := rec.Metrics[k]; ok {
					t.Errorf("%s both measured and missing", k)
				}
			}
			switch {
			case c.warn == "" && len(rec.Warnings) > 0:
				t.Errorf("warnings %q, want none", rec.Warnings)
			case c.warn != "" && (len(rec.Warnings) != 1 || !strings.Contains(rec.Warnings[0], c.warn)):
				t.Errorf("warnings %q, want one saying %q", rec.Warnings, c.warn)
			}
			for _, k := range c.absent {
				if _, ok := rec.Metrics[k]; ok {
					t.Errorf("%s measured, want absent", k)
				}
				if _, ok := rec.Missing[k]; ok {
					t.Errorf("%s missing (%q), want absent: it does not apply", k, rec.Missing[k])
				}
			}
		})
	}
}

// A trial of several windows (a rate sweep) is not probed: its datapath
// figures are missing with the reason, not taken from whichever step the
// probe's window caught.
func TestUnprobedMarksDatapathMissing(t *testing.T) {
	s := &scenario.Scenario{Duration: time.Second}
	rec := results.Record{Metrics: map[string]float64{results.TransactionsPerS: 1000,
		results.CPUSecondsClient: 0.2, results.CPUSecondsServer: 0.3, results.DurationS: 1}}
	unprobed(s, []results.Component{{Name: "kernel", Role: "kernel"}}, errors.New("one window per step")).addTo(&rec)
	for _, k := range []string{results.CPUCoresDatapath, results.CPUCoresSoftirq, results.EnergyJoules, results.TransactionsPerSPerCore} {
		if _, ok := rec.Metrics[k]; ok {
			t.Errorf("%s recorded", k)
		}
		if !strings.Contains(rec.Missing[k], "one window per step") {
			t.Errorf("%s missing reason %q", k, rec.Missing[k])
		}
	}
	if got := rec.Metrics[results.CPUCoresGenerator]; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("generator cores %g, want 0.5 (from the workload's own CPU)", got)
	}
}
