package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/cgroup"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// requireCgroups skips t unless it runs as root on a machine with CPU cgroups.
func requireCgroups(t *testing.T) {
	t.Helper()
	datapathtest.RequireRoot(t)
	cg, err := cgroup.New(cgroup.Spec{Path: "spanperf-" + runner.NewID() + "/probe"})
	if errors.Is(err, cgroup.ErrNotSupported) {
		t.Skipf("this machine has no CPU cgroups: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	cg.Close()
}

// window measures the CPU of each group over the measured part of a
// workload run that starts now: from warm to warm+d.
func window(groups map[string]*cgroup.Cgroup, warm, d time.Duration) func() map[string]float64 {
	type reading struct {
		at time.Time
		u  map[string]time.Duration
	}
	read := func() reading {
		r := reading{at: time.Now(), u: map[string]time.Duration{}}
		for n, g := range groups {
			r.u[n], _ = g.Usage()
		}
		return r
	}
	c0, c1 := make(chan reading, 1), make(chan reading, 1)
	time.AfterFunc(warm, func() { c0 <- read() })
	time.AfterFunc(warm+d, func() { c1 <- read() })
	return func() map[string]float64 {
		r0, r1 := <-c0, <-c1
		out := map[string]float64{}
		for n := range groups {
			out[n] = (r1.u[n] - r0.u[n]).Seconds() / r1.at.Sub(r0.at).Seconds()
		}
		return out
	}
}

// wireguard-go held to 0.25 CPU by its cgroup's quota uses at most 0.30
// cores by the cgroup's own count, and carries less than without the limit.
func TestWireGuardGoCPULimit(t *testing.T) {
	requireCgroups(t)
	tb, link := datapathtest.Setup(t, netns.Spec{Sites: 2}, "wireguard", nil)
	groups := map[string]*cgroup.Cgroup{}
	for _, c := range link.Components {
		if c.PID <= 0 {
			continue
		}
		cg, err := cgroup.New(cgroup.Spec{Path: "spanperf-" + tb.Ledger().Run() + "/" + c.Name, Ledger: tb.Ledger()})
		if err != nil {
			t.Fatal(err)
		}
		// Before the testbed's cleanup: t.Cleanup runs last-registered first.
		t.Cleanup(func() {
			if err := cg.Close(); err != nil {
				t.Errorf("close %s: %v", c.Name, err)
			}
		})
		if err := cg.AddTree(c.PID); err != nil {
			t.Fatal(err)
		}
		groups[c.Name] = cg
	}
	if len(groups) != 2 {
		t.Fatalf("components %+v: want two wireguard-go processes", link.Components)
	}
	const warm, d = 500 * time.Millisecond, 2 * time.Second
	stream := func() (float64, map[string]float64) {
		w := window(groups, warm, d)
		res := datapathtest.MustRun(t, tb, link, "stream", results.Params{"message_size": int64(65536), "streams": int64(1)}, d, warm)
		return res.Metrics[results.ThroughputBPS], w()
	}
	setLimit := func(cores float64) {
		for _, g := range groups {
			if err := g.SetCPULimit(cores); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The machine's two cores are shared with other tests: measure the
	// pair again once if the limited run is not clearly slower.
	for try := 0; try < 2; try++ {
		setLimit(0)
		free, freeCores := stream()
		setLimit(0.25)
		held, heldCores := stream()
		t.Logf("unlimited: %.3g bit/s, cores %v; at 0.25 CPU: %.3g bit/s, cores %v", free, freeCores, held, heldCores)
		for name, c := range heldCores {
			if c > 0.30 || c <= 0 {
				t.Fatalf("%s limited to 0.25 CPU used %.3f cores, want 0 < cores ≤ 0.30", name, c)
			}
		}
		if held < 0.8*free {
			return
		}
		t.Logf("throughput at 0.25 CPU not below 80%% of unlimited; measuring again")
	}
	t.Error("throughput did not drop under a 0.25 CPU limit")
}

// ours lists the spanperf cgroups on the machine that are not another live
// process's (tests of other packages run at the same time).
func ours() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/spanperf-*")
	var out []string
	for _, d := range dirs {
		run := netns.RunOf(filepath.Base(d))
		ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, run+".ledger"))
		if err == nil && len(ents) > 0 && ents[0].Owner != os.Getpid() && testbed.Alive(ents[0].Owner, ents[0].OwnerStart) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func newRun(t *testing.T, src string) runner.Options {
	t.Helper()
	s, err := scenario.Parse("limits.yaml", []byte(src), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := results.Create(filepath.Join(t.TempDir(), "run"), results.Manifest{Run: runner.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return runner.Options{Scenario: s, Dir: dir, Seed: 1}
}

// runRecords runs the scenario src through the runner and returns its
// records.
func runRecords(t *testing.T, src string) []results.Record {
	t.Helper()
	o := newRun(t, src)
	if err := runner.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	recs, err := o.Dir.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// A limits sweep through the runner: each trial runs under its limit and
// says so, its cgroup CPU stays under it, native (which has no tunnel
// process) runs once without the limit, and no cgroup is left.
func TestRunLimitsSweep(t *testing.T) {
	requireCgroups(t)
	datapathtest.New(t, "wireguard", nil) // skips where wireguard cannot run
	o := newRun(t, `
datapaths: [wireguard, native]
workloads:
  - type: stream
    message_size: 65536
limits:
  tunnel: {cpu: [0.25, 2]}
repetitions: 1
duration: 1500ms
warmup: 300ms
`)
	if err := runner.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	recs, err := o.Dir.Records()
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v: want 3", len(recs), err)
	}
	param := results.CPULimitParam("tunnel")
	for _, r := range recs {
		limit, _ := r.Params[param].(float64)
		if r.Datapath == "native" {
			if _, ok := r.Params[param]; ok || r.Error != "" {
				t.Errorf("native trial: param %s = %#v, error %q; want no limit and no error", param, r.Params[param], r.Error)
			}
			continue
		}
		if limit != 0.25 && limit != 2 {
			t.Errorf("trial %d: param %s = %#v", r.Trial, param, r.Params[param])
		}
		if r.Error != "" {
			t.Errorf("trial %d: %s", r.Trial, r.Error)
			continue
		}
		n := 0
		for _, c := range r.Components {
			if c.PID <= 0 {
				continue
			}
			n++
			if got := r.Metrics[results.For(results.CPULimitCores, c.Name)]; got != limit {
				t.Errorf("trial %d: %s = %v, want %v", r.Trial, results.For(results.CPULimitCores, c.Name), got, limit)
			}
			cores, ok := r.Metrics[results.For(results.CgroupCPUCores, c.Name)]
			if !ok || cores <= 0 || cores > limit+0.05 {
				t.Errorf("trial %d: %s = %v (present %v), want 0 < cores ≤ %v (missing: %v)", r.Trial, results.For(results.CgroupCPUCores, c.Name), cores, ok, limit+0.05, r.Missing)
			}
			t.Logf("limit %v: %s used %.3f cores; throughput %.3g bit/s", limit, c.Name, cores, r.Metrics[results.ThroughputBPS])
		}
		if n != 2 {
			t.Errorf("trial %d: %d processes among the components, want 2", r.Trial, n)
		}
	}
	if left := ours(); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}

// A run cancelled in the middle of a trial removes its cgroups with the
// rest of the testbed.
func TestRunCancelRemovesCgroups(t *testing.T) {
	requireCgroups(t)
	datapathtest.New(t, "wireguard", nil)
	o := newRun(t, `
datapaths: [wireguard]
workloads:
  - type: stream
limits:
  tunnel: {cpu: 0.5}
repetitions: 1
duration: 20s
warmup: 0s
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runner.Run(ctx, o) }()
	var seen []string
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		for _, d := range ours() {
			if sub, _ := filepath.Glob(filepath.Join(d, "wireguard-go@*")); len(sub) > 0 {
				seen = append(seen, sub...)
			}
		}
	}
	if len(seen) == 0 {
		cancel()
		t.Fatalf("no wireguard-go cgroup appeared within 30 s (run: %v)", <-errc)
	}
	time.Sleep(time.Second) // into the trial
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	for _, d := range seen {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind", d)
		}
	}
	if left := ours(); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	if recs, _ := o.Dir.Records(); len(recs) != 0 {
		t.Errorf("%d records of an abandoned trial", len(recs))
	}
}
