package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/cgroup"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/workload"
)

// burner starts a process that spins on a CPU, stopped (SIGSTOP) unless
// running, and kills it at the end of the test.
func burner(t *testing.T, running bool) *os.Process {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !running {
		cmd.Process.Signal(syscall.SIGSTOP)
	}
	return cmd.Process
}

// TestProbeWindowIsMeasuredWindow runs a trial the way runGroup and
// runTrial do (cgroups, then the probe, around the workload) with a fake
// workload whose set-up spins a CPU in one component ("setup"), then marks
// its measured window (Env.Measure) and spins another ("window") instead.
// The probe's and the cgroups' figures must cover the window only: the
// set-up's CPU shows in neither, the window's in both, and the recorded
// window starts the delay after the mark and lasts its length. (Before
// the window was marked by the workload, both counted from the trial's
// start: the set-up's spinning showed, the window's did not.)
func TestProbeWindowIsMeasuredWindow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes cgroups")
	}
	if cg, err := cgroup.New(cgroup.Spec{Path: "spanperf-" + NewID() + "/probe"}); errors.Is(err, cgroup.ErrNotSupported) {
		t.Skipf("no CPU cgroups: %v", err)
	} else if err == nil {
		cg.Close()
	}
	setup, win := burner(t, true), burner(t, false)
	comps := []results.Component{{Name: "setup", Role: "relay", PID: setup.Pid}, {Name: "window", Role: "relay", PID: win.Pid}}
	cgs := newComponentCgroups(NewID(), nil, comps)
	t.Cleanup(func() { cgs.Close() })
	if len(cgs.missing) > 0 {
		t.Fatalf("no cgroups: %v", cgs.missing)
	}
	const setupTime, delay, length = 700 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond
	// The scenario's warmup and duration would put a window counted from
	// the trial's start inside the set-up.
	s := &scenario.Scenario{Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, ProbeInterval: 50 * time.Millisecond}
	o := Options{Scenario: s, Dir: &results.RunDir{}}
	var marked time.Time
	var pd *probed
	rec := cgs.run(o, Trial{Point: scenario.Point{Workload: "fake"}}, func(measure workload.MeasureFunc) results.Record {
		rec := results.Record{Metrics: map[string]float64{}}
		var err error
		_, pd, err = runProbed(context.Background(), s, comps, nil, func(probe workload.MeasureFunc) (*workload.Result, error) {
			env := workload.Env{Measure: func(d, l time.Duration) { measure(d, l); probe(d, l) }}
			time.Sleep(setupTime) // set-up: "setup" spins
			setup.Signal(syscall.SIGSTOP)
			win.Signal(syscall.SIGCONT)
			marked = time.Now()
			env.Measure(delay, length)
			time.Sleep(delay + length + 200*time.Millisecond)
			win.Signal(syscall.SIGSTOP)
			return &workload.Result{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rec.WindowStart, rec.WindowEnd = pd.res.Start, pd.res.End
		pd.addTo(&rec)
		return rec
	})
	if rec.Error != "" {
		t.Fatal(rec.Error)
	}
	m := rec.Metrics
	t.Logf("window %s..%s (marked %s), metrics %v, missing %v", rec.WindowStart.Format(time.StampMicro), rec.WindowEnd.Format(time.StampMicro),
		marked.Format(time.StampMicro), m, rec.Missing)
	for _, k := range []string{results.For(results.CPUCores, "setup"), results.For(results.CgroupCPUCores, "setup")} {
		if v, ok := m[k]; !ok || v > 0.02 {
			t.Errorf("%s = %v (recorded %v): the set-up's CPU is counted", k, v, ok)
		}
	}
	// A spinning process gets a whole core on an idle machine, and on a
	// busy one at least several ticks of 10 ms in half a second; a stopped
	// one, none.
	for _, k := range []string{results.For(results.CPUCores, "window"), results.For(results.CgroupCPUCores, "window")} {
		if v, ok := m[k]; !ok || v < 0.05 {
			t.Errorf("%s = %v (recorded %v): the window's CPU is not counted", k, v, ok)
		}
	}
	if lead := rec.WindowStart.Sub(marked); lead < delay-5*time.Millisecond || lead > delay+50*time.Millisecond {
		t.Errorf("window starts %v after the mark, want %v", lead, delay)
	}
	if got := rec.WindowEnd.Sub(rec.WindowStart); got < length-5*time.Millisecond || got > length+50*time.Millisecond {
		t.Errorf("window lasts %v, want %v", got, length)
	}
	if w := m[results.ProbeWindow]; w != rec.WindowEnd.Sub(rec.WindowStart).Seconds() {
		t.Errorf("probe_window_s %v, window %v", w, rec.WindowEnd.Sub(rec.WindowStart))
	}
}

// A workload that never marks its window is not measured, and says so.
func TestProbeWithoutWindow(t *testing.T) {
	s := &scenario.Scenario{Warmup: 0, Duration: 100 * time.Millisecond}
	comps := []results.Component{{Name: "kernel", Role: "kernel"}}
	_, pd, err := runProbed(context.Background(), s, comps, nil, func(workload.MeasureFunc) (*workload.Result, error) {
		time.Sleep(150 * time.Millisecond)
		return &workload.Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := results.Record{Metrics: map[string]float64{}}
	pd.addTo(&rec)
	if _, ok := rec.Metrics[results.CPUCoresSoftirq]; ok || rec.Missing[results.CPUCoresSoftirq] != "probe: "+errNoWindow.Error() {
		t.Errorf("metrics %v, missing %v: want softirq missing for want of a window", rec.Metrics, rec.Missing)
	}
}
