package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// probed is a trial's probe, or why it could not start.
type probed struct {
	p     *probe.Probe
	err   error
	res   probe.Result
	comps []results.Component
	s     *scenario.Scenario
	// warnings are the probe's own (node probes that shared a kernel).
	warnings []string
}

// runProbed runs one trial's workload (run) with a probe sampling comps
// over the trial's measured window. run passes measure on to the workload
// (workload.Env.Measure), which calls it when it starts its measured
// client: the probe starts then, takes its first sample delay later and
// its last length after that, or when run returns. Set-up before (a
// server, a database, keys) is not in the window. The window begins
// slightly before the client's own, by the client's start and connect.
//
// Processes in the namespaces netns (inodes) are the run's own, like this
// process's descendants; the rest is foreign (see probe.Spec).
func runProbed(ctx context.Context, s *scenario.Scenario, comps []results.Component, netns []uint64, run func(measure workload.MeasureFunc) (*workload.Result, error)) (*workload.Result, *probed, error) {
	pd := &probed{comps: comps, s: s, err: errNoWindow}
	var once sync.Once
	measure := func(delay, length time.Duration) {
		once.Do(func() {
			pd.p, pd.err = probe.Start(ctx, probe.Spec{
				Components: comps,
				Netns:      netns,
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
//   - The cost of the path, on one basis for every datapath: the probe's
//     results.CPUCoresPath (the machine's busy CPU less the foreign CPU of
//     processes that are not the run's: generator, datapath processes,
//     kernel threads and softirq alike) per unit of work.
//     results.CPUSecondsPerGigabyte is path cores × the client's measured
//     seconds per 10⁹ bytes (stream); results.CPUMicrosPerTransaction is
//     path cores per transaction per second (transactions_per_s, else
//     connections_per_s, else requests_per_s), in µs.
//   - results.ThroughputBPSPerCore, TransactionsPerSPerCore and
//     ConnectionsPerSPerCore: the workload's rate per path core.
//   - results.JoulesPerGigabyte: results.EnergyJoules per 10⁹ bytes moved
//     (stream only: the workload that reports bytes).
//   - A warning in rec.Warnings when the foreign CPU exceeds
//     results.ForeignCPUWarnCores.
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
		for _, k := range []string{results.CPUCoresDatapath, results.CPUCoresSoftirq, results.CPUCoresPath, results.EnergyJoules} {
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

	path, pathOK := m[results.CPUCoresPath]
	pathWhy := ""
	switch {
	case !pathOK:
		why := missing[results.CPUCoresPath]
		if why == "" {
			why = "not measured"
		}
		pathWhy = results.CPUCoresPath + ": " + why
	case path <= 0:
		pathWhy = results.CPUCoresPath + " measured 0"
	}
	perUnit := func(name string, v func() float64) {
		if pathWhy != "" {
			missing[name] = pathWhy
			return
		}
		m[name] = v()
	}
	for _, d := range []struct{ rate, perCore string }{
		{results.ThroughputBPS, results.ThroughputBPSPerCore},
		{results.TransactionsPerS, results.TransactionsPerSPerCore},
		{results.ConnectionsPerS, results.ConnectionsPerSPerCore},
	} {
		if rate, ok := m[d.rate]; ok {
			perUnit(d.perCore, func() float64 { return rate / path })
		}
	}
	if bytes, ok := m[results.Bytes]; ok {
		if bytes <= 0 {
			missing[results.CPUSecondsPerGigabyte] = "no bytes moved"
		} else {
			perUnit(results.CPUSecondsPerGigabyte, func() float64 { return path * secs / (bytes / 1e9) })
		}
	}
	for _, r := range []string{results.TransactionsPerS, results.ConnectionsPerS, workload.MetricRequestsPerS} {
		rate, ok := m[r]
		if !ok {
			continue
		}
		if rate <= 0 {
			missing[results.CPUMicrosPerTransaction] = r + " is 0"
		} else {
			perUnit(results.CPUMicrosPerTransaction, func() float64 { return path / rate * 1e6 })
		}
		break
	}
	rec.Warnings = append(rec.Warnings, pd.warnings...)
	if f, ok := m[results.CPUCoresForeign]; ok && f > results.ForeignCPUWarnCores {
		rec.Warnings = append(rec.Warnings, ForeignWarning(f, pd.res.Foreign))
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

// ForeignWarning is the warning of a trial that shared the machine with
// cores of foreign CPU (see results.CPUCoresForeign), naming the commands
// that used the most of it (from procs, by command name).
func ForeignWarning(cores float64, procs []probe.ProcessCPU) string {
	byComm := map[string]float64{}
	var comms []string
	for _, p := range procs {
		if _, ok := byComm[p.Comm]; !ok {
			comms = append(comms, p.Comm)
		}
		byComm[p.Comm] += p.Cores
	}
	slices.SortStableFunc(comms, func(a, b string) int { return cmp.Compare(byComm[b], byComm[a]) })
	var top []string
	for _, c := range comms[:min(3, len(comms))] {
		top = append(top, fmt.Sprintf("%s %.2f", c, byComm[c]))
	}
	who := ""
	if len(top) > 0 {
		who = " (" + strings.Join(top, ", ")
		if len(comms) > 3 {
			who += ", …"
		}
		who += ")"
	}
	return fmt.Sprintf("foreign CPU: %.2f cores of processes not in the run%s shared the machine; the CPU figures exclude them, but the rates may be lower", cores, who)
}

// runNetns returns the inodes of the network namespaces of the testbed
// site belongs to: every namespace named for its run, the datapath's own
// included. It is empty for a site that is not a local namespace.
func runNetns(site testbed.Site) []uint64 {
	ns, ok := site.(*netns.Site)
	if !ok {
		return nil
	}
	run := netns.RunOf(ns.Namespace())
	if run == "" {
		return nil
	}
	var out []uint64
	for _, name := range netns.ListNamed() {
		if netns.RunOf(name) != run {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(netns.NetnsDir, name), &st) == nil {
			out = append(out, st.Ino)
		}
	}
	return out
}
