package workload_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// pgbenchCases are the pgbench runs recorded on Debian 12 (PostgreSQL 15)
// in testdata/drivers: pgbench-NAME.stdout is pgbench's stdout and stderr
// merged, as the driver reads them, and pgbench-NAME.log its
// per-transaction logs (one per thread, concatenated). Each ran with the
// driver's flags (-n -U postgres -l --log-prefix=DIR/tx plus those below)
// against a server started as the driver starts it; the window is what
// the driver would have asked for with that -T.
var pgbenchCases = map[string]workload.PgbenchWindow{
	// -b select-only -c 4 -j 2 -T 3 -R 200
	"paced": {Warmup: 500 * time.Millisecond, Duration: 2 * time.Second, Rate: 200},
	// -b tpcb-like -c 2 -j 1 -T 2
	"tpcb": {Warmup: 500 * time.Millisecond, Duration: time.Second},
	// -p of a port nothing listens on
	"refused": {Warmup: 500 * time.Millisecond, Duration: time.Second},
	// -b tpcb-like -c 2 -j 1 -T 2 on a database whose pgbench_history was dropped
	"abort-nohistory": {Warmup: 500 * time.Millisecond, Duration: time.Second},
	// -b select-only -c 2 -j 1 -T 2 -R 100, a backend terminated
	// (pg_terminate_backend) 1.2 s in
	"abort-terminated": {Warmup: 500 * time.Millisecond, Duration: time.Second, Rate: 100},
	// -b select-only -c 4 -j 2 -T 3 -R 100, pgbench killed (SIGTERM) 1.5 s
	// in: only its banner was out, its logs still buffered
	"killed": {Warmup: 500 * time.Millisecond, Duration: 2 * time.Second, Rate: 100},
}

// TestPgbenchParseGolden parses the recorded pgbench runs against
// testdata/drivers/pgbench-*.golden (rewrite with -update). The inputs are
// named .stdout, not .out, so that TestParseGolden, which knows the other
// tools, leaves them alone.
func TestPgbenchParseGolden(t *testing.T) {
	outs, _ := filepath.Glob(filepath.Join("testdata", "drivers", "pgbench-*.stdout"))
	if len(outs) != len(pgbenchCases) {
		t.Errorf("%d recorded outputs, %d cases", len(outs), len(pgbenchCases))
	}
	for _, p := range outs {
		name := strings.TrimSuffix(filepath.Base(p), ".stdout")
		t.Run(name, func(t *testing.T) {
			w, ok := pgbenchCases[strings.TrimPrefix(name, "pgbench-")]
			if !ok {
				t.Fatalf("no window for %s in pgbenchCases", name)
			}
			out, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			log, err := os.ReadFile(strings.TrimSuffix(p, ".stdout") + ".log")
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			checkGolden(t, name, goldenText(workload.ParsePgbench(out, log, w)), "refused", "abort", "killed")
		})
	}
}

// pgbenchLog makes a transaction log: one transaction every step from
// start (s since the epoch) for n transactions, each taking lat and ending
// at its start plus lat; with lag >= 0, lines carry that schedule lag.
// Transactions whose number is in failed are logged as failed.
func pgbenchLog(start float64, step, lat, lag time.Duration, n int, failed ...int) []byte {
	var b strings.Builder
	for i := range n {
		end := int64(start*1e6) + int64(i)*step.Microseconds() + lat.Microseconds()
		field := fmt.Sprint(lat.Microseconds())
		if slices.Contains(failed, i) {
			field = "failed"
		}
		fmt.Fprintf(&b, "%d %d %s 0 %d %d", i%2, i/2+1, field, end/1e6, end%1e6)
		if lag >= 0 {
			fmt.Fprintf(&b, " %d", lag.Microseconds())
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

const pgbenchSummary = "number of transactions actually processed: 300\n"

// TestParsePgbenchWindow: only transactions that ended in the window count,
// the window starts a warmup after the first transaction began, failures
// are errors, and a paced run's latency is pgbench's (from the scheduled
// start, lag included), not latency plus lag.
func TestParsePgbenchWindow(t *testing.T) {
	// 300 transactions 10 ms apart from t=1000.5 s, 2 ms each, 0.5 ms late.
	log := pgbenchLog(1000.5, 10*time.Millisecond, 2*time.Millisecond, 500*time.Microsecond, 300, 5, 150, 151)
	w := workload.PgbenchWindow{Warmup: time.Second, Duration: time.Second, Rate: 100}
	res, err := workload.ParsePgbench([]byte(pgbenchSummary), log, w)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Metrics
	// In [1001.5, 1002.5) end transactions 100..199 less the two failed.
	want := map[string]float64{
		results.TransactionsPerS: 98, results.DurationS: 1, workload.MetricErrors: 2,
		results.TargetRate: 100, results.Sustained: 1, workload.MetricOfferedPerS: 100,
	}
	for k, v := range want {
		if math.Abs(m[k]-v) > 1e-9 {
			t.Errorf("%s = %g, want %g", k, m[k], v)
		}
	}
	if p50 := m[results.LatencyP50]; math.Abs(p50-0.002) > 0.002*0.001 {
		t.Errorf("p50 %g, want 2 ms (the logged latency, lag already in it)", p50)
	}
	if lag := m[workload.MetricScheduleLagP99]; math.Abs(lag-0.0005) > 0.0005*0.001 {
		t.Errorf("schedule lag p99 %g, want 0.5 ms", lag)
	}
	if res.Histogram == "" {
		t.Error("no histogram")
	}

	w.Rate = 110
	if m, _ := workload.ParsePgbench([]byte(pgbenchSummary), log, w); m.Metrics[results.Sustained] != 0 {
		t.Errorf("98/s of 110/s: sustained = %g, want 0", m.Metrics[results.Sustained])
	}

	// A window past the log's end is cut at its last transaction.
	w = workload.PgbenchWindow{Warmup: 2 * time.Second, Duration: 5 * time.Second}
	res, err = workload.ParsePgbench([]byte(pgbenchSummary), pgbenchLog(1000, 10*time.Millisecond, time.Millisecond, -1, 300), w)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Metrics[results.DurationS]; math.Abs(d-0.991) > 1e-9 {
		t.Errorf("duration %g s, want 0.991 (cut at the last transaction)", d)
	}
	if _, ok := res.Metrics[results.TargetRate]; ok {
		t.Error("target_rate in a flat-out run")
	}

	// A run that ended within the warmup is an error.
	w = workload.PgbenchWindow{Warmup: 5 * time.Second, Duration: time.Second}
	if _, err := workload.ParsePgbench([]byte(pgbenchSummary), log, w); err == nil || !strings.Contains(err.Error(), "within the warmup") {
		t.Errorf("run shorter than the warmup: err = %v", err)
	}
}

// TestFindPostgres: PATH first, else the highest version under the glob
// that has the program; nowhere is ErrNotSupported naming the package.
func TestFindPostgres(t *testing.T) {
	dir := t.TempDir()
	const prog = "spanperf-test-initdb"
	for _, v := range []string{"9.6", "15", "16", "100"} {
		bin := filepath.Join(dir, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		name := prog
		if v == "16" {
			continue // no programs at all
		}
		if v == "100" {
			name = "other"
		}
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	glob := filepath.Join(dir, "*", "bin")
	got, err := workload.FindPostgres(prog, glob)
	if want := filepath.Join(dir, "15", "bin", prog); err != nil || got != want {
		t.Errorf("FindPostgres = %q, %v; want %q", got, err, want)
	}
	if got, err := workload.FindPostgres("sh", glob); err != nil || filepath.Base(got) != "sh" || strings.HasPrefix(got, dir) {
		t.Errorf("sh: %q, %v; want the one in PATH", got, err)
	}
	_, err = workload.FindPostgres("spanperf-no-such-program", glob)
	if !errors.Is(err, testbed.ErrNotSupported) || !strings.Contains(err.Error(), "spanperf-no-such-program") || !strings.Contains(err.Error(), "postgresql") {
		t.Errorf("missing program: %v, want ErrNotSupported naming it and package postgresql", err)
	}
}

// requirePgbench skips t when PostgreSQL is not installed, saying what is missing.
func requirePgbench(t *testing.T) {
	t.Helper()
	if err := (workload.Pgbench{}).Check(t.Context()); errors.Is(err, testbed.ErrNotSupported) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// pgbenchTempDir points TMPDIR, where the driver makes its directories, at
// a directory of the test's own that the user postgres can enter, so that
// pgbench runs of other processes do not confuse pgbenchLeftovers.
func pgbenchTempDir(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("", "spanperf-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
}

// pgbenchLeftovers lists what pgbench trials of this process left behind:
// entries in the temp dir (see pgbenchTempDir), and processes descended
// from this one that work in a driver's directory (postgres works in its
// data directory) or name one (initdb, postgres, pgbench's log prefix).
func pgbenchLeftovers(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(os.TempDir(), e.Name()))
	}
	parent := func(pid string) string {
		b, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PPid:"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	self := fmt.Sprint(os.Getpid())
	descends := func(pid string) bool {
		for range 64 {
			if pid = parent(pid); pid == self {
				return true
			} else if pid == "" || pid == "0" || pid == "1" {
				return false
			}
		}
		return false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		mark := "/spanperf-pgbench-"
		if (strings.Contains(cwd, mark) || strings.Contains(string(cmdline), mark)) && descends(filepath.Base(p)) {
			out = append(out, fmt.Sprintf("process %s (%s)", filepath.Base(p), strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
		}
	}
	return out
}

// checkNoLeftovers fails t if pgbenchLeftovers lists anything.
func checkNoLeftovers(t *testing.T) {
	t.Helper()
	for _, l := range pgbenchLeftovers(t) {
		t.Errorf("left behind: %s", l)
	}
}

// TestPgbenchEndToEnd runs the driver for real over native and vxlan:
// flat out, and paced well below what the machine can do.
func TestPgbenchEndToEnd(t *testing.T) {
	requirePgbench(t)
	for _, dp := range []string{"native", "vxlan"} {
		t.Run(dp, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, dp, nil)
			run := func(t *testing.T, p results.Params, d, warm time.Duration) *workload.Result {
				t.Helper()
				pgbenchTempDir(t)
				res, err := datapathtest.Run(tb, link, "pgbench", p, d, warm)
				checkNoLeftovers(t)
				if err != nil {
					t.Fatalf("pgbench: %v", err)
				}
				t.Logf("pgbench %v over %s: %v", p, dp, res.Metrics)
				return res
			}
			t.Run("flat", func(t *testing.T) {
				r := run(t, results.Params{"clients": int64(4), "jobs": int64(2)}, 2*time.Second, 500*time.Millisecond)
				m := r.Metrics
				checkLatencies(t, m, results.TransactionsPerS, 500)
				if m[workload.MetricErrors] != 0 || r.Histogram == "" {
					t.Errorf("%g errors, histogram %d bytes", m[workload.MetricErrors], len(r.Histogram))
				}
				if d := m[results.DurationS]; math.Abs(d-2) > 0.01 {
					t.Errorf("window %g s, want 2 s", d)
				}
				if _, ok := m[results.CPUSecondsServer]; !ok || m[results.CPUSecondsServer] <= 0 {
					t.Errorf("cpu_seconds_server %v (recorded %v), want > 0", m[results.CPUSecondsServer], ok)
				}
			})
			// pgbench paces with Poisson arrivals: the count in a window of
			// rate × duration expected transactions has a standard deviation
			// of its square root. 10000 keep the test's tolerance (6%) at
			// six of them, and sustained (≥ 95%) at five (a false 0 once in
			// 4 million runs; at 200/s for 2 s it would be 15%).
			t.Run("paced", func(t *testing.T) {
				const rate = 4000
				// Prepared statements (-M prepared), as the Skupper sizing
				// guide's runs; flat above uses pgbench's default, simple.
				m := run(t, results.Params{"clients": int64(4), "rate": float64(rate), "query_mode": "prepared"}, 2500*time.Millisecond, 500*time.Millisecond).Metrics
				if got := m[results.TransactionsPerS]; math.Abs(got/rate-1) > 0.06 {
					t.Errorf("achieved %.0f/s at %d/s", got, rate)
				}
				if m[results.TargetRate] != rate || m[results.Sustained] != 1 || m[workload.MetricErrors] != 0 {
					t.Errorf("target %g, sustained %g, errors %g; want %d, 1, 0", m[results.TargetRate], m[results.Sustained], m[workload.MetricErrors], rate)
				}
				if got, off := m[results.TransactionsPerS], m[workload.MetricOfferedPerS]; math.Abs(got/off-1) > 0.02 {
					t.Errorf("achieved %.0f/s of %.0f/s offered, want within 2%%", got, off)
				}
				if p50, lag := m[results.LatencyP50], m[workload.MetricScheduleLagP50]; !(p50 > 0 && lag < p50) {
					t.Errorf("latency p50 %g, schedule lag p50 %g: want 0 < lag < latency", p50, lag)
				}
			})
			if dp != "native" {
				return
			}
			t.Run("tpcb", func(t *testing.T) {
				m := run(t, results.Params{"clients": int64(2), "mode": "tpcb", "scale": int64(2)}, time.Second, 200*time.Millisecond).Metrics
				checkLatencies(t, m, results.TransactionsPerS, 100)
				if m[workload.MetricErrors] != 0 {
					t.Errorf("%g errors", m[workload.MetricErrors])
				}
			})
			// Cancelled during its run, the driver returns the context's
			// error and leaves nothing behind.
			t.Run("cancel", func(t *testing.T) {
				client, server, target := runner.Endpoints(tb, link, agent.DefaultPort)
				env := workload.Env{Client: client, Server: server, Port: agent.DefaultPort, Target: target,
					Params: results.Params{"clients": int64(2)}, Duration: 30 * time.Second}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				time.AfterFunc(3*time.Second, cancel)
				pgbenchTempDir(t)
				start := time.Now()
				_, err := workload.Pgbench{}.Run(ctx, env)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
				if d := time.Since(start); d > 15*time.Second {
					t.Errorf("returned %s after the start, want soon after the cancel at 3 s", d)
				}
				checkNoLeftovers(t)
			})
		})
	}
}

// execLog is a site that logs when each process it starts begins and ends.
type execLog struct {
	testbed.Site
	mu     sync.Mutex
	events []execEvent
}

// execEvent is a process's name, start and end (zero while it runs: the
// end is stamped a moment after the exit, by a goroutine of its own).
type execEvent struct {
	name       string
	start, end time.Time
	p          testbed.Process
}

func (s *execLog) Exec(ctx context.Context, cmd testbed.Command) (testbed.Process, error) {
	start := time.Now()
	p, err := s.Site.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	i := len(s.events)
	s.events = append(s.events, execEvent{name: cmd.Name, start: start, p: p})
	s.mu.Unlock()
	go func() {
		<-p.Done()
		s.mu.Lock()
		s.events[i].end = time.Now()
		s.mu.Unlock()
	}()
	return p, nil
}

// find returns the event of the process named name.
func (s *execLog) find(t *testing.T, name string) execEvent {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.name == name {
			return e
		}
	}
	t.Fatalf("no process %s started (%v)", name, s.events)
	return execEvent{}
}

// TestPgbenchMeasuresItsOwnWindow: the driver marks its measured window
// (Env.Measure, which starts the runner's CPU, cgroup and energy probes)
// once, after initdb, the server's start and pgbench -i are done, right
// before pgbench starts, as the warmup and duration pgbench's figures
// cover; so the set-up's CPU is not charged to the trial.
func TestPgbenchMeasuresItsOwnWindow(t *testing.T) {
	requirePgbench(t)
	tb, link := datapathtest.Setup(t, netns.Spec{}, "native", nil)
	client, server, target := runner.Endpoints(tb, link, agent.DefaultPort)
	cl, sv := &execLog{Site: client}, &execLog{Site: server}
	type call struct {
		at            time.Time
		delay, length time.Duration
	}
	var calls []call
	// setupRunning lists the set-up steps that had not exited when the
	// window was marked: read from the processes themselves, not from the
	// end stamps, which come a moment later.
	var setupRunning []string
	const warm, dur = 300 * time.Millisecond, time.Second
	env := workload.Env{Client: cl, Server: sv, Port: agent.DefaultPort, Target: target,
		Params: results.Params{"clients": int64(2)}, Duration: dur, Warmup: warm,
		Measure: func(delay, length time.Duration) {
			calls = append(calls, call{time.Now(), delay, length})
			for _, setup := range []string{"initdb", "pgbench-init"} {
				select {
				case <-sv.find(t, setup).p.Done():
				default:
					setupRunning = append(setupRunning, setup)
				}
			}
		}}
	pgbenchTempDir(t)
	if _, err := (workload.Pgbench{}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	checkNoLeftovers(t)
	if len(calls) != 1 {
		t.Fatalf("Measure called %d times, want once", len(calls))
	}
	c := calls[0]
	if c.delay != warm || c.length != dur {
		t.Errorf("Measure(%v, %v), want (%v, %v)", c.delay, c.length, warm, dur)
	}
	if len(setupRunning) > 0 {
		t.Errorf("window marked at %s while %v still ran", c.at.Format(time.StampMicro), setupRunning)
	}
	pg := cl.find(t, "pgbench")
	if lead := pg.start.Sub(c.at); lead < 0 || lead > 50*time.Millisecond {
		t.Errorf("window marked %v before pgbench started, want 0..50ms", lead)
	}
	// The window lies inside pgbench's run.
	if from, to := c.at.Add(c.delay), c.at.Add(c.delay+c.length); from.Before(pg.start) || to.After(pg.end) {
		t.Errorf("window %s..%s not inside pgbench's run %s..%s", from.Format(time.StampMicro), to.Format(time.StampMicro),
			pg.start.Format(time.StampMicro), pg.end.Format(time.StampMicro))
	}
}
