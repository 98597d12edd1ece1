package plugins_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

func TestMain(m *testing.M) {
	agent.RunIfChild()
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
}

// setup builds a testbed with datapath name (default options) and returns it
// with its link; a datapath this machine cannot run skips the test, saying why.
func setup(t *testing.T, spec netns.Spec, name string, opts map[string]any) (*netns.Testbed, *datapath.Link) {
	t.Helper()
	requireRoot(t)
	info, ok := plugins.Datapath(name)
	if !ok {
		t.Fatalf("datapath %s not registered", name)
	}
	if opts == nil {
		opts = map[string]any{}
		for _, f := range info.Options {
			if f.Default != nil {
				opts[f.Name] = f.Default
			}
		}
	}
	dp, err := info.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if c, ok := dp.(datapath.Checker); ok {
		if err := c.Check(ctx); errors.Is(err, datapath.ErrNotSupported) {
			t.Skipf("this machine cannot run %s: %v", name, err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	spec.Run = runner.NewID()
	tb, err := netns.New(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed close: %v", err)
		}
		for _, ns := range netns.ListNamed() {
			if strings.Contains(ns, spec.Run) {
				t.Errorf("namespace %s left behind", ns)
			}
		}
	})
	link, err := dp.Setup(ctx, tb)
	if err != nil {
		t.Fatalf("setup %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := link.Close(context.Background()); err != nil {
			t.Errorf("link close: %v", err)
		}
	})
	return tb, link
}

func runWorkload(t *testing.T, tb *netns.Testbed, link *datapath.Link, wl string, p results.Params, d, warm time.Duration) *workload.Result {
	t.Helper()
	info, ok := plugins.Workload(wl)
	if !ok {
		t.Fatalf("workload %s not registered", wl)
	}
	sites := tb.Sites()
	env := workload.Env{
		Client: sites[0], Server: sites[1], Port: agent.DefaultPort,
		Target: link.Target(sites[0], sites[1], agent.DefaultPort),
		Params: p, Duration: d, Warmup: warm,
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+warm+30*time.Second)
	defer cancel()
	res, err := info.New().Run(ctx, env)
	if err != nil {
		t.Fatalf("%s: %v", wl, err)
	}
	return res
}

// TestDatapathsCarryWorkloads runs stream, rr and crr through every
// registered datapath this machine can run, and checks each measured
// something plausible.
func TestDatapathsCarryWorkloads(t *testing.T) {
	for _, d := range plugins.Datapaths() {
		t.Run(d.Name, func(t *testing.T) {
			tb, link := setup(t, netns.Spec{}, d.Name, nil)
			if len(link.Components) == 0 {
				t.Error("datapath names no component")
			}
			st := runWorkload(t, tb, link, "stream", results.Params{"message_size": int64(65536), "streams": int64(2)}, time.Second, 200*time.Millisecond)
			if bps := st.Metrics[results.ThroughputBPS]; bps < 10e6 {
				t.Errorf("stream throughput %.3g bit/s, want > 10 Mbit/s", bps)
			}
			if s := st.Series[results.ThroughputBPS]; len(s.Values) != 1 || s.Interval != 1 {
				t.Errorf("stream series %+v, want one 1 s bucket", s)
			}
			rr := runWorkload(t, tb, link, "rr", results.Params{"request_size": int64(64), "response_size": int64(1024), "concurrency": int64(2)}, time.Second, 200*time.Millisecond)
			checkLatency(t, "rr", rr, results.TransactionsPerS, 500)
			crr := runWorkload(t, tb, link, "crr", results.Params{"request_size": int64(64), "response_size": int64(64), "concurrency": int64(1)}, time.Second, 200*time.Millisecond)
			checkLatency(t, "crr", crr, results.ConnectionsPerS, 50)
		})
	}
}

func checkLatency(t *testing.T, name string, r *workload.Result, rate string, minRate float64) {
	t.Helper()
	m := r.Metrics
	if m[rate] < minRate {
		t.Errorf("%s: %s = %.1f, want ≥ %.0f", name, rate, m[rate], minRate)
	}
	p50, p99, max := m[results.LatencyP50], m[results.LatencyP99], m[results.LatencyMax]
	if !(p50 > 0 && p50 <= p99 && p99 <= max && max < 1) {
		t.Errorf("%s: latency p50 %g p99 %g max %g: want 0 < p50 ≤ p99 ≤ max < 1 s", name, p50, p99, max)
	}
	// Closed loop: rate × mean latency ≈ concurrency (Little's law), within slack
	// for the client's own time between transactions.
	if n := m[rate] * m[results.LatencyMean]; n > float64(2)*1.05 || n < 0.3 {
		t.Errorf("%s: rate × mean latency = %.2f, want about the concurrency", name, n)
	}
	if r.Histogram == "" {
		t.Errorf("%s: no histogram", name)
	}
}

// TestShapedStreamKnownAnswer shapes the underlay to R with tbf and checks
// that stream measures between 0.90 R and 1.01 R.
func TestShapedStreamKnownAnswer(t *testing.T) {
	const rate = 200e6
	tb, link := setup(t, netns.Spec{RateBPS: rate}, "native", nil)
	st := runWorkload(t, tb, link, "stream", results.Params{"message_size": int64(131072), "streams": int64(1)}, 3*time.Second, time.Second)
	got := st.Metrics[results.ThroughputBPS]
	t.Logf("shaped to %.0f Mbit/s, measured %.1f Mbit/s (%.3f R)", rate/1e6, got/1e6, got/rate)
	if got < 0.90*rate || got > 1.01*rate {
		t.Errorf("measured %.1f Mbit/s, want %.0f–%.0f", got/1e6, 0.90*rate/1e6, 1.01*rate/1e6)
	}
}

// TestExamplesParse loads every shipped scenario with the real catalog.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		s, err := scenario.Load(f, plugins.Catalog{})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Points()) == 0 {
			t.Errorf("%s: no workload points", f)
		}
	}
}
