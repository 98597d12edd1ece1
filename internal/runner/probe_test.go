package runner_test

import (
	"math"
	"testing"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// A real run of native and wireguard-go carries the probe's figures: the
// daemons' CPU, the generator's, the kernel's, and an estimated energy
// (this machine has no RAPL).
func TestRunRecordsCPUAndEnergy(t *testing.T) {
	datapathtest.RequireRoot(t)
	src := `name: probe
datapaths: [native, wireguard]
workloads:
  - type: stream
  - type: rr
repetitions: 1
duration: 1s
warmup: 300ms
`
	s, err := scenario.Parse("probe.yaml", []byte(src), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Datapaths {
		datapathtest.New(t, d.Name, d.Options) // skips where the machine cannot run one
	}
	recs := runRecords(t, src)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.Datapath, r.Workload, r.Error)
			continue
		}
		m := r.Metrics
		t.Logf("%s %s: datapath %.3f cores, generator %.3f, softirq %.3f, busy %.3f, foreign %.3f, path %.3f, energy %.2f J (estimated %v), per core %.4g, CPU-s/GB %.3g, µs/transaction %.3g, J/GB %.3g; missing %v; warnings %q",
			r.Datapath, r.Workload, m[results.CPUCoresDatapath], m[results.CPUCoresGenerator], m[results.CPUCoresSoftirq],
			m[results.CPUCoresBusy], m[results.CPUCoresForeign], m[results.CPUCoresPath], m[results.EnergyJoules], m[results.EnergyEstimated],
			m[results.ThroughputBPSPerCore]+m[results.TransactionsPerSPerCore], m[results.CPUSecondsPerGigabyte],
			m[results.CPUMicrosPerTransaction], m[results.JoulesPerGigabyte], r.Missing, r.Warnings)
		path, pok := m[results.CPUCoresPath]
		foreign, fok := m[results.CPUCoresForeign]
		if !pok || !fok || math.Abs(path-max(m[results.CPUCoresBusy]-foreign, 0)) > 1e-9 {
			t.Errorf("%s %s: path %v (present %v), foreign %v (present %v), busy %v: want path = busy − foreign",
				r.Datapath, r.Workload, path, pok, foreign, fok, m[results.CPUCoresBusy])
		}
		// The generator, at least, is on the path.
		if path < m[results.CPUCoresGenerator]*0.8 {
			t.Errorf("%s %s: path %.3f cores below the generator's %.3f", r.Datapath, r.Workload, path, m[results.CPUCoresGenerator])
		}
		cost := results.CPUSecondsPerGigabyte
		if r.Workload == "rr" {
			cost = results.CPUMicrosPerTransaction
		}
		if m[cost] <= 0 {
			t.Errorf("%s %s: %s %v (missing %q)", r.Datapath, r.Workload, cost, m[cost], r.Missing[cost])
		}
		if m[results.CPUCoresGenerator] <= 0 {
			t.Errorf("%s %s: cpu_cores_generator %v", r.Datapath, r.Workload, m[results.CPUCoresGenerator])
		}
		if m[results.EnergyJoules] <= 0 || m[results.EnergyEstimated] != 1 || r.Missing[results.EnergyRAPL] == "" {
			t.Errorf("%s %s: energy %v J estimated %v (missing %q), want > 0 J, estimated",
				r.Datapath, r.Workload, m[results.EnergyJoules], m[results.EnergyEstimated], r.Missing[results.EnergyRAPL])
		}
		if w := m[results.ProbeWindow]; w < 0.9 || w > 1.3 {
			t.Errorf("%s %s: probe window %.3f s, want about the 1 s duration", r.Datapath, r.Workload, w)
		}
		for _, k := range []string{results.CPUCoresSoftirq, results.CPUCoresBusy} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s %s: no %s", r.Datapath, r.Workload, k)
			}
		}
		switch r.Datapath {
		case "native":
			if _, ok := m[results.CPUCoresDatapath]; ok {
				t.Errorf("native: cpu_cores_datapath without a datapath process")
			}
		case "wireguard":
			for _, c := range r.Components {
				if c.PID == 0 {
					continue
				}
				if v := m[results.For(results.CPUCores, c.Name)]; v <= 0 {
					t.Errorf("wireguard %s: cpu_cores{%s} = %v, want > 0", r.Workload, c.Name, v)
				}
				if v := m[results.For(results.RSSBytesMax, c.Name)]; v < 1<<20 {
					t.Errorf("wireguard %s: rss_bytes_max{%s} = %v", r.Workload, c.Name, v)
				}
			}
			if m[results.CPUCoresDatapath] <= 0 {
				t.Errorf("wireguard %s: cpu_cores_datapath %v", r.Workload, m[results.CPUCoresDatapath])
			}
		}
		per := results.ThroughputBPSPerCore
		if r.Workload == "rr" {
			per = results.TransactionsPerSPerCore
		}
		if _, ok := m[per]; !ok && r.Missing[per] == "" {
			t.Errorf("%s %s: %s neither measured nor missing", r.Datapath, r.Workload, per)
		}
		if r.Workload == "stream" && m[results.JoulesPerGigabyte] <= 0 {
			t.Errorf("%s stream: joules_per_gigabyte %v", r.Datapath, m[results.JoulesPerGigabyte])
		}
	}
}
