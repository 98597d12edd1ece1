// Package probe samples, during a trial, what the trial costs: the CPU and
// memory of each component's process tree, the machine's CPU time (user,
// system, irq, softirq: mpstat's view), how much of it was foreign (spent
// by processes that are not the run's) and its energy (RAPL, or an
// estimate from CPU time). It knows nothing of what is measured: components come in as
// process IDs, results go out as metrics in base units, and what could
// not be measured is reported as missing, with the reason, never as zero.
package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// DefaultInterval is Spec.Interval when left at zero.
const DefaultInterval = 200 * time.Millisecond

// Spec says what a Probe samples and when.
type Spec struct {
	// Interval is the time between samples; default DefaultInterval. Peak
	// figures are over one interval.
	Interval time.Duration
	// Components are measured one by one: each with a PID > 0 as that
	// process and all its descendants (found anew at every sample), a pod
	// or container (PodUID set) as the processes Finder finds; the others
	// (the kernel) are covered by the machine-wide figures.
	Components []results.Component
	// Delay is how long after Start the first sample is taken (the
	// trial's warmup).
	Delay time.Duration
	// Window is how long sampling lasts after the first sample; 0 means
	// until Stop.
	Window time.Duration
	// Energy estimates energy from CPU time where RAPL cannot be read.
	Energy EnergyModel
	// Proc is the procfs root; default "/proc".
	Proc string
	// Powercap is the powercap root with the RAPL zones; default
	// DefaultPowercap.
	Powercap string
	// Controller is the process whose tree is the run's own (the one that
	// starts the testbed, datapath and agents); default this process.
	Controller int
	// Netns are the inodes of the run's network namespaces (as the
	// /proc/PID/ns/net links name them): a process in one of them is the
	// run's own, wherever it descends from. The rest of the machine's
	// user-space CPU is foreign (see results.CPUCoresForeign).
	Netns []uint64
	// Finder, when set, finds the processes of the components that have
	// no process ID of their own (a pod's or a container's: PID 0, PodUID
	// set), and which processes are the run's own besides those above.
	// Without it such a component is left out, like the kernel.
	Finder Finder
}

// A Finder finds processes by something other than a process ID (on a
// Kubernetes node, by the pod cgroup they run in: see package nodeprobe).
// The probe calls Refresh at the start of every sample, then the other
// two methods, from one goroutine.
type Finder interface {
	// Refresh looks at the processes anew.
	Refresh() error
	// Processes returns every process of component c (PID 0, PodUID set)
	// as the last Refresh found them, or why there are none; their
	// descendants are not added (a container's children share its
	// cgroup).
	Processes(c results.Component) ([]int, error)
	// Own reports whether process pid was one of the run's own at the
	// last Refresh.
	Own(pid int) bool
}

// found reports whether c is measured as processes: by its PID, or by
// the Finder.
func (s Spec) found(c results.Component) bool {
	return c.PID > 0 || (c.PodUID != "" && s.Finder != nil)
}

// Normalize fills in the defaults.
func (s *Spec) Normalize() {
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.Proc == "" {
		s.Proc = "/proc"
	}
	if s.Powercap == "" {
		s.Powercap = DefaultPowercap
	}
	if s.Controller == 0 {
		s.Controller = os.Getpid()
	}
	s.Energy.Normalize()
}

// Validate reports a negative duration or a bad energy model.
func (s Spec) Validate() error {
	switch {
	case s.Interval < 0:
		return fmt.Errorf("probe: interval must be ≥ 0, got %v", s.Interval)
	case s.Delay < 0:
		return fmt.Errorf("probe: delay must be ≥ 0, got %v", s.Delay)
	case s.Window < 0:
		return fmt.Errorf("probe: window must be ≥ 0, got %v", s.Window)
	}
	if err := s.Energy.Validate(); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// Result is what a probe measured.
type Result struct {
	// Metrics by name (see the CPU, memory and energy names in package
	// results), in base units.
	Metrics map[string]float64
	// Missing maps each metric the probe could not measure to the reason.
	// It also holds results.EnergyRAPL when the energy is an estimate.
	Missing map[string]string
	// Start and End are when the first and last samples were taken; zero
	// when the window never began.
	Start, End time.Time
	// Foreign lists the processes counted in results.CPUCoresForeign, most
	// CPU first.
	Foreign []ProcessCPU
}

// Probe is a running sampler, started by Start.
type Probe struct {
	stop chan struct{}
	done chan struct{}
	res  Result
}

// Start normalizes and validates spec, then samples in a goroutine: the
// first sample Delay after Start, then one every Interval until Window has
// passed, Stop is called or ctx is done, whichever comes first; the end
// takes a last sample. Start fails only on a bad spec: a component that
// cannot be read is reported in Result.Missing.
func Start(ctx context.Context, spec Spec) (*Probe, error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p := &Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx, newSampler(spec))
	return p, nil
}

// Stop ends sampling, if the window has not already ended, and returns
// what was measured. It may be called more than once; later calls return
// the same Result.
func (p *Probe) Stop() Result {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	return p.res
}

// Done is closed when sampling has ended: the window has passed, ctx is
// done or Stop was called. Stop then returns at once.
func (p *Probe) Done() <-chan struct{} { return p.done }

func (p *Probe) run(ctx context.Context, s *sampler) {
	defer close(p.done)
	delay := time.NewTimer(s.spec.Delay)
	defer delay.Stop()
	select {
	case <-delay.C:
	case <-p.stop:
		p.res = s.result()
		return
	case <-ctx.Done():
		p.res = s.result()
		return
	}
	first := time.Now()
	s.sample(first)
	var end <-chan time.Time
	if s.spec.Window > 0 {
		t := time.NewTimer(s.spec.Window - time.Since(first))
		defer t.Stop()
		end = t.C
	}
	tick := time.NewTicker(s.spec.Interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.sample(time.Now())
			continue
		case <-end:
		case <-p.stop:
		case <-ctx.Done():
		}
		s.sample(time.Now())
		p.res = s.result()
		return
	}
}

// pidState is what the last sample saw of one process.
type pidState struct {
	start, ticks uint64
}

// compAcc accumulates one component's figures across samples.
type compAcc struct {
	// readable is set once its root process was read.
	readable bool
	lastErr  error
	ticks    uint64
	// pend holds the ticks since pendSince, not yet turned into a peak
	// (an interval shorter than half of Interval is merged into the next).
	pend      uint64
	pendSince time.Time
	peak      float64
	peaked    bool
	rssMax    uint64
	rssSum    float64
	rssN      int
}

// sampler holds the state of one probe's samples.
type sampler struct {
	spec  Spec
	hz    float64
	page  uint64
	fs    procfs
	n     int
	first time.Time
	last  time.Time
	// lastUp is the uptime, in ticks, at the last sample.
	lastUp uint64
	pids   map[int]pidState
	comps  []compAcc
	// dpTicks is the CPU of the union of every component's processes.
	dpTicks uint64

	// machine tells the run's CPU from the foreign (see scan).
	machine machine

	stat0, stat1 *cpuStat
	statErr      error
	rapl         *rapl
	raplErr      error
}

func newSampler(spec Spec) *sampler {
	return &sampler{
		spec: spec, hz: userHZ(), page: uint64(os.Getpagesize()),
		fs:    procfs{root: spec.Proc},
		pids:  map[int]pidState{},
		comps: make([]compAcc, len(spec.Components)),
	}
}

// sample reads everything once.
func (s *sampler) sample(now time.Time) {
	began := time.Now()
	up, upErr := s.fs.uptimeTicks(s.hz)
	seen := map[int]pidState{}
	delta := map[int]uint64{}
	var refreshErr error
	if s.spec.Finder != nil {
		refreshErr = s.spec.Finder.Refresh()
	}
	for i, c := range s.spec.Components {
		if !s.spec.found(c) {
			continue
		}
		acc := &s.comps[i]
		var tree []int
		if c.PID > 0 {
			if tree = s.fs.tree(c.PID); tree == nil {
				acc.lastErr = fmt.Errorf("process %d not found", c.PID)
				continue
			}
		} else {
			var err error
			if refreshErr != nil {
				err = refreshErr
			} else if tree, err = s.spec.Finder.Processes(c); err == nil && len(tree) == 0 {
				err = fmt.Errorf("pod %s: no process found", c.PodUID)
			}
			if err != nil {
				acc.lastErr = err
				continue
			}
		}
		var ticks, rss uint64
		rootRead := false
		for _, pid := range tree {
			st, ok := seen[pid]
			var rssPages uint64
			if !ok {
				ps, err := s.fs.stat(pid)
				if err != nil {
					if pid == c.PID || c.PID <= 0 {
						acc.lastErr = err
					}
					continue // exited since the walk: what was measured stays
				}
				st = pidState{start: ps.start, ticks: ps.ticks}
				seen[pid] = st
				rssPages = ps.rssPages
				delta[pid] = s.pidDelta(pid, st, up, upErr)
			} else {
				// Counted under an earlier component already; its RSS is
				// read again for this one.
				if ps, err := s.fs.stat(pid); err == nil {
					rssPages = ps.rssPages
				}
			}
			// A component found by the Finder has no root: any of its
			// processes read will do.
			if pid == c.PID || c.PID <= 0 {
				rootRead = true
			}
			ticks += delta[pid]
			rss += rssPages * s.page
		}
		if !rootRead {
			continue
		}
		acc.readable = true
		acc.rssMax = max(acc.rssMax, rss)
		acc.rssSum += float64(rss)
		acc.rssN++
		if s.n == 0 {
			acc.pendSince = now
			continue
		}
		acc.ticks += ticks
		acc.pend += ticks
		if acc.pendSince.IsZero() {
			// First read after the first sample: no interval to rate yet.
			acc.pendSince, acc.pend = now, 0
			continue
		}
		if el := now.Sub(acc.pendSince); el >= s.spec.Interval/2 {
			acc.peak = max(acc.peak, float64(acc.pend)/s.hz/el.Seconds())
			acc.peaked = true
			acc.pend, acc.pendSince = 0, now
		}
	}
	for _, d := range delta {
		s.dpTicks += d
	}
	s.pids = seen
	// Every process, then /proc/stat: the two reads as close together as
	// they can be.
	s.scan(seen, up, upErr)
	if upErr == nil {
		s.lastUp = up
	}

	// The time of this read on the caller's clock: the machine's busy time
	// is its elapsed time less idle between two reads.
	at := now.Add(time.Since(began))
	if b, err := os.ReadFile(filepath.Join(s.spec.Proc, "stat")); err != nil {
		s.statErr = err
	} else if st, err := parseCPUStat(b); err != nil {
		s.statErr = err
	} else if st.at = at; s.stat0 == nil {
		s.stat0 = &st
	} else {
		s.stat1 = &st
	}

	if s.n == 0 {
		s.rapl, s.raplErr = openRAPL(s.spec.Powercap)
	} else if s.rapl != nil && s.raplErr == nil {
		s.raplErr = s.rapl.sample()
	}

	if s.n == 0 {
		s.first = now
	}
	s.last = now
	s.n++
}

// pidDelta is the CPU ticks process pid used since the last sample. A
// process seen for the first time counts in full if it was born after the
// last sample, and is only a baseline otherwise (in the first sample, or
// when an earlier walk missed it).
func (s *sampler) pidDelta(pid int, st pidState, up uint64, upErr error) uint64 {
	if prev, ok := s.pids[pid]; ok && prev.start == st.start {
		if st.ticks < prev.ticks {
			return 0
		}
		return st.ticks - prev.ticks
	}
	if s.n > 0 && upErr == nil && st.start >= s.lastUp {
		return st.ticks
	}
	return 0
}

// result turns the samples into metrics.
func (s *sampler) result() Result {
	r := Result{Metrics: map[string]float64{}, Missing: map[string]string{}}
	secs := s.last.Sub(s.first).Seconds()
	if s.n < 2 || secs <= 0 {
		reason := "the trial ended before the probe's window began"
		if s.n == 1 {
			reason = "the trial ended right after the probe's window began: one sample"
		}
		for i, c := range s.spec.Components {
			if s.spec.found(c) {
				s.comps[i].readable = false
				s.comps[i].lastErr = errors.New(reason)
			}
		}
		s.statErr = errors.New(reason)
		s.stat1 = nil
		s.raplErr = errors.New(reason)
		s.rapl = nil
		s.machine.err = errors.New(reason)
		secs = 0
	} else {
		r.Metrics[results.ProbeWindow] = secs
		r.Start, r.End = s.first, s.last
	}

	procs, missingProcs := 0, []string{}
	for i, c := range s.spec.Components {
		if !s.spec.found(c) {
			continue
		}
		procs++
		acc := s.comps[i]
		names := []string{results.CPUCores, results.CPUCoresPeak, results.RSSBytesMax, results.RSSBytesAvg}
		if !acc.readable {
			reason := "not readable"
			if acc.lastErr != nil {
				reason = acc.lastErr.Error()
			}
			for _, n := range names {
				r.Missing[results.For(n, c.Name)] = reason
			}
			missingProcs = append(missingProcs, c.Name)
			continue
		}
		r.Metrics[results.For(results.CPUCores, c.Name)] = float64(acc.ticks) / s.hz / secs
		if acc.peaked {
			r.Metrics[results.For(results.CPUCoresPeak, c.Name)] = acc.peak
		} else {
			r.Missing[results.For(results.CPUCoresPeak, c.Name)] = "no full sampling interval"
		}
		r.Metrics[results.For(results.RSSBytesMax, c.Name)] = float64(acc.rssMax)
		r.Metrics[results.For(results.RSSBytesAvg, c.Name)] = acc.rssSum / float64(acc.rssN)
	}
	if procs > 0 {
		if len(missingProcs) > 0 {
			r.Missing[results.CPUCoresDatapath] = fmt.Sprintf("components not measured: %v", missingProcs)
		} else {
			r.Metrics[results.CPUCoresDatapath] = float64(s.dpTicks) / s.hz / secs
		}
	}

	kernel := []string{results.CPUCoresUser, results.CPUCoresSystem, results.CPUCoresIRQ,
		results.CPUCoresSoftirq, results.CPUCoresBusy}
	if s.stat0 != nil && s.stat1 != nil {
		for k, v := range kernelMetrics(*s.stat0, *s.stat1, s.hz, s.stat1.at.Sub(s.stat0.at).Seconds()) {
			r.Metrics[k] = v
		}
	} else {
		reason := "/proc/stat not read"
		if s.statErr != nil {
			reason = "/proc/stat: " + s.statErr.Error()
		}
		for _, k := range kernel {
			r.Missing[k] = reason
		}
	}
	s.pathMetrics(&r, secs)

	switch {
	case s.rapl != nil && s.raplErr == nil && s.rapl.total > 0:
		r.Metrics[results.EnergyJoules] = s.rapl.joules()
		r.Metrics[results.EnergyEstimated] = 0
	default:
		why := "no RAPL"
		switch {
		case s.rapl != nil && s.raplErr == nil:
			why = "RAPL reads 0"
		case s.raplErr != nil && !errors.Is(s.raplErr, errNoRAPL):
			why = "RAPL not readable (" + s.raplErr.Error() + ")"
		}
		busy, ok := r.Metrics[results.CPUCoresBusy]
		if !ok {
			r.Missing[results.EnergyJoules] = why + ", and no CPU time to estimate from: " + r.Missing[results.CPUCoresBusy]
			break
		}
		r.Metrics[results.EnergyJoules] = s.spec.Energy.Joules(busy, secs)
		r.Metrics[results.EnergyEstimated] = 1
		r.Missing[results.EnergyRAPL] = why + ": estimated from CPU time"
	}
	return r
}

// pathMetrics adds results.CPUCoresForeign and results.CPUCoresPath (busy
// less foreign), or says why they are missing.
func (s *sampler) pathMetrics(r *Result, secs float64) {
	m := &s.machine
	if m.err != nil || !m.scanned {
		why := "processes not scanned"
		if m.err != nil {
			why = "processes not scanned: " + m.err.Error()
		}
		r.Missing[results.CPUCoresForeign] = why
		r.Missing[results.CPUCoresPath] = results.CPUCoresForeign + ": " + why
		return
	}
	foreign := float64(m.ticks) / s.hz / secs
	r.Metrics[results.CPUCoresForeign] = foreign
	r.Foreign = m.foreignProcesses(s.hz, secs)
	busy, ok := r.Metrics[results.CPUCoresBusy]
	if !ok {
		r.Missing[results.CPUCoresPath] = results.CPUCoresBusy + ": " + r.Missing[results.CPUCoresBusy]
		return
	}
	// Ticks of a process and of /proc/stat are sampled a moment apart: a
	// machine busy only with foreign work may read a hair below 0.
	r.Metrics[results.CPUCoresPath] = max(busy-foreign, 0)
}
