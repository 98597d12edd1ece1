package runner_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/workload"
)

// pgbenchWatch polls /proc for the PostgreSQL programs of a pgbench trial
// whose files live under dir: when the set-up (initdb, pgbench -i) was
// last seen, and when the measured pgbench was first and last seen.
type pgbenchWatch struct {
	mu                      sync.Mutex
	setupLast               time.Time
	clientFirst, clientLast time.Time
	// gap is the longest time between two polls: how late the watch
	// may have seen a program start.
	gap  time.Duration
	stop chan struct{}
	done chan struct{}
}

func watchPgbench(dir string) *pgbenchWatch {
	w := &pgbenchWatch{stop: make(chan struct{}), done: make(chan struct{})}
	mark := []byte(dir)
	go func() {
		defer close(w.done)
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			now := time.Now()
			w.mu.Lock()
			w.gap = max(w.gap, now.Sub(last))
			w.mu.Unlock()
			last = now
			for _, p := range procs {
				b, err := os.ReadFile(p)
				if err != nil || !bytes.Contains(b, mark) {
					continue
				}
				args := bytes.Split(b, []byte{0})
				prog := filepath.Base(string(args[0]))
				init := false
				for _, a := range args {
					if string(a) == "-i" {
						init = true
					}
				}
				w.mu.Lock()
				switch {
				case prog == "initdb" || prog == "pgbench" && init:
					w.setupLast = now
				case prog == "pgbench":
					if w.clientFirst.IsZero() {
						w.clientFirst = now
					}
					w.clientLast = now
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *pgbenchWatch) end() {
	close(w.stop)
	<-w.done
}

// TestPgbenchTrialWindow runs a pgbench trial through the runner and
// checks the window its record's CPU and energy figures cover: after the
// set-up (initdb, the server's start, pgbench -i, CPU-heavy work that is
// not the datapath's) has ended, a warmup into the measured pgbench's run,
// and over before pgbench ends. Before workloads marked their windows,
// the window began a warmup after the trial's start, inside initdb.
func TestPgbenchTrialWindow(t *testing.T) {
	datapathtest.RequireRoot(t)
	if err := (workload.Pgbench{}).Check(t.Context()); errors.Is(err, testbed.ErrNotSupported) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	// The trial's files go under a directory of the test's own (which the
	// user postgres can enter), so the watch sees only this trial's programs.
	tmp, err := os.MkdirTemp("", "spanperf-wintest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	const warm, dur = 300 * time.Millisecond, time.Second
	src := "name: pgwindow\ndatapaths: [native]\nworkloads:\n  - type: pgbench\n    clients: 2\nrepetitions: 1\nduration: 1s\nwarmup: 300ms\n"
	s, err := scenario.Parse("pgwindow.yaml", []byte(src), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := results.Create(filepath.Join(t.TempDir(), "run"), results.Manifest{Run: runner.NewID(), Scenario: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	w := watchPgbench(tmp)
	err = runner.Run(context.Background(), runner.Options{Scenario: s, Dir: dir, Seed: 1})
	w.end()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := dir.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (%v), want 1", len(recs), err)
	}
	r := recs[0]
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	at := func(x time.Time) time.Duration { return x.Sub(r.Start).Round(time.Millisecond) }
	t.Logf("from the trial's start: set-up last seen %v, pgbench seen %v..%v, window %v..%v, trial end %v; polls up to %v apart",
		at(w.setupLast), at(w.clientFirst), at(w.clientLast), at(r.WindowStart), at(r.WindowEnd), at(r.End), w.gap)
	if w.setupLast.IsZero() || w.clientFirst.IsZero() {
		t.Fatalf("the watch saw no set-up (%v) or no pgbench (%v)", w.setupLast, w.clientFirst)
	}
	if r.WindowStart.IsZero() || !r.WindowStart.After(w.setupLast) {
		t.Errorf("window starts at %v, before the set-up ended (last seen at %v)", at(r.WindowStart), at(w.setupLast))
	}
	// The window starts a warmup after pgbench does (which the watch saw
	// up to a poll late), and ends before pgbench does.
	if lead := r.WindowStart.Sub(w.clientFirst); lead < warm-w.gap-20*time.Millisecond || lead > warm+10*time.Millisecond {
		t.Errorf("window starts %v after pgbench was first seen (polls up to %v apart), want the %v warmup", lead, w.gap, warm)
	}
	if r.WindowEnd.After(w.clientLast.Add(10 * time.Millisecond)) {
		t.Errorf("window ends at %v, after pgbench (last seen at %v)", at(r.WindowEnd), at(w.clientLast))
	}
	if got := r.Metrics[results.ProbeWindow]; got < dur.Seconds()-0.01 || got > dur.Seconds()+0.1 {
		t.Errorf("probe_window_s %v, want about %v", got, dur.Seconds())
	}
}
