package workload_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// TestEveryWorkloadMarksItsWindow runs every registered workload that
// runs one window (not a rate sweep) briefly over native and checks that
// it marks its measured window (Env.Measure, which starts the runner's
// CPU and energy probes) exactly once, with a window that lies inside
// its run: a workload that forgot would leave its trials unmeasured.
func TestEveryWorkloadMarksItsWindow(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "native", nil)
	client, server, target := runner.Endpoints(tb, link, agent.DefaultPort)
	for _, info := range plugins.Workloads() {
		t.Run(info.Name, func(t *testing.T) {
			w := info.New()
			if _, ok := w.(workload.TrialLimiter); ok {
				t.Skip("runs one window per step: the runner does not probe it")
			}
			if _, ok := w.(workload.SetupTimer); ok {
				t.Skip("times a datapath's setup, with no measured window: the runner does not probe it")
			}
			if _, ok := w.(workload.ControlRunner); ok {
				t.Skip("times what the datapath's control plane does, with no measured window: the runner does not probe it")
			}
			if c, ok := w.(workload.Checker); ok {
				if err := c.Check(t.Context()); errors.Is(err, testbed.ErrNotSupported) {
					t.Skip(err)
				} else if err != nil {
					t.Fatal(err)
				}
			}
			params := results.Params{}
			for _, f := range info.Params {
				if f.Default != nil {
					params[f.Name] = f.Default
				}
			}
			var mu sync.Mutex
			var calls []time.Time
			var delay, length time.Duration
			env := workload.Env{Client: client, Server: server, Port: agent.DefaultPort, Target: target, Params: params,
				Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
				Measure: func(d, l time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					calls, delay, length = append(calls, time.Now()), d, l
				}}
			if info.Name == "pgbench" {
				pgbenchTempDir(t)
			}
			start := time.Now()
			if _, err := w.Run(t.Context(), env); err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 1 {
				t.Fatalf("Measure called %d times, want once", len(calls))
			}
			if from, to := calls[0].Add(delay), calls[0].Add(delay+length); length <= 0 || from.Before(start) || to.After(end) {
				t.Errorf("window %v..%v after the start, not inside the run (0..%v)", from.Sub(start), to.Sub(start), end.Sub(start))
			}
		})
	}
}
