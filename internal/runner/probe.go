package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/workload"
)

// probed is a trial's probe, or why it could not start.
type probed struct {
	p     *probe.Probe
	err   error
	res   probe.Result
	comps []results.Component
	s     *scenario.Scenario
}

// runProbed runs one trial's workload (run) with a probe sampling comps
// over the trial's measured window. run passes measure on to the workload
// (workload.Env.Measure), which calls it when it starts its measured
// client: the probe starts then, takes its first sample delay later and
// its last length after that, or when run returns. Set-up before (a
// server, a database, keys) is not in the window. The window begins
// slightly before the client's own, by the client's start and connect.
func runProbed(ctx context.Context, s *scenario.Scenario, comps []results.Component, run func(measure workload.MeasureFunc) (*workload.Result, error)) (*workload.Result, *probed, error) {
	pd := &probed{comps: comps, s: s, err: errNoWindow}
	var once sync.Once
	measure := func(delay, length time.Duration) {
		once.Do(func() {
			pd.p, pd.err = probe.Start(ctx, probe.Spec{
				Components: comps,
				Interval:   s.ProbeInterval,
				Delay:      delay,
				Window:     length,
				Energy:     probe.EnergyModel{IdleWatts: s.Energy.IdleWatts, WattsPerCore: s.Energy.WattsPerCore},
			})
		})
	}
	res, err := run(measure)
	once.Do(func() {}) // a later measure starts nothing
	if pd.p != nil {
		pd.res = pd.p.Stop()
	}
	return res, pd, err
}

// errNoWindow is the probe's error when the workload never marked its
// measured window.
var errNoWindow = errors.New("not measured: the workload marked no measured window")

// unprobed is the probe of a trial that was not probed, and why.
func unprobed(s *scenario.Scenario, comps []results.Component, why error) *probed {
	return &probed{comps: comps, s: s, err: why}
}

// addTo merges the probe's metrics into rec and adds what derives from
// them and from the workload's metrics:
//
//   - results.CPUCoresGenerator: the load generator's cores, (client CPU
//     seconds + server CPU seconds) / the client's measured seconds.
//   - results.ThroughputBPSPerCore, TransactionsPerSPerCore and
//     ConnectionsPerSPerCore: the workload's rate per datapath core, where
//     the datapath's cores are the same sum for every datapath, so that
//     per-core figures compare across kinds: its processes' cores
//     (results.CPUCoresDatapath, 0 when its only component is the kernel)
//     plus the machine-wide kernel packet work (results.CPUCoresSoftirq:
//     veth, routing, in-kernel tunnels, TUN delivery), which has no process.
//   - results.JoulesPerGigabyte: results.EnergyJoules per 10⁹ bytes moved
//     (stream only: the workload that reports bytes).
//
// A derived metric whose inputs are missing goes to rec.Missing with the
// reason; one that does not apply to the workload is left out.
func (pd *probed) addTo(rec *results.Record) {
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	m := rec.Metrics
	missing := map[string]string{}
	for k, v := range rec.Missing {
		missing[k] = v
	}
	if pd.err != nil {
		for _, k := range []string{results.CPUCoresDatapath, results.CPUCoresSoftirq, results.EnergyJoules} {
			missing[k] = "probe: " + pd.err.Error()
		}
	}
	for k, v := range pd.res.Metrics {
		m[k] = v
	}
	for k, v := range pd.res.Missing {
		missing[k] = v
	}

	secs, ok := m[results.DurationS]
	if !ok || secs <= 0 {
		secs = pd.s.Duration.Seconds()
	}
	cli, okc := m[results.CPUSecondsClient]
	srv, oks := m[results.CPUSecondsServer]
	switch {
	case okc && oks:
		m[results.CPUCoresGenerator] = (cli + srv) / secs
	default:
		var not []string
		if !okc {
			not = append(not, "client")
		}
		if !oks {
			not = append(not, "server")
		}
		missing[results.CPUCoresGenerator] = fmt.Sprintf("the workload did not report its %s CPU", strings.Join(not, " and "))
	}

	hasProcs := false
	for _, c := range pd.comps {
		if c.PID > 0 {
			hasProcs = true
		}
	}
	basis := results.CPUCoresSoftirq
	soft, softOK := m[results.CPUCoresSoftirq]
	procs, procsOK := m[results.CPUCoresDatapath]
	if !hasProcs {
		procs, procsOK = 0, true
	} else if !procsOK {
		basis = results.CPUCoresDatapath
	}
	cores, coresOK := soft+procs, softOK && procsOK
	for _, d := range []struct{ rate, perCore string }{
		{results.ThroughputBPS, results.ThroughputBPSPerCore},
		{results.TransactionsPerS, results.TransactionsPerSPerCore},
		{results.ConnectionsPerS, results.ConnectionsPerSPerCore},
	} {
		rate, ok := m[d.rate]
		switch {
		case !ok:
		case !coresOK:
			why := missing[basis]
			if why == "" {
				why = "not measured"
			}
			missing[d.perCore] = basis + ": " + why
		case cores <= 0:
			missing[d.perCore] = basis + " measured 0"
		default:
			m[d.perCore] = rate / cores
		}
	}

	if bytes, ok := m[results.Bytes]; ok {
		joules, jok := m[results.EnergyJoules]
		switch {
		case !jok:
			missing[results.JoulesPerGigabyte] = "energy_joules: " + missing[results.EnergyJoules]
		case bytes <= 0:
			missing[results.JoulesPerGigabyte] = "no bytes moved"
		default:
			m[results.JoulesPerGigabyte] = joules / (bytes / 1e9)
		}
	}
	if len(missing) > 0 {
		rec.Missing = missing
	}
}
