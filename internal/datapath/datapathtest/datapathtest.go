// Package datapathtest runs datapaths for real in tests: a local testbed,
// the datapath set up on it, and the built-in workloads through it. Test
// binaries that use it must call agent.RunIfChild first in TestMain.
package datapathtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/roottest"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// RequireRoot returns when t runs as root; otherwise it fails t, or skips
// it under go test -short (roottest.Require).
func RequireRoot(t testing.TB) {
	t.Helper()
	roottest.Require(t, "creates network namespaces")
}

// Defaults returns the default options of a registered datapath.
func Defaults(t testing.TB, name string) map[string]any {
	t.Helper()
	info, ok := plugins.Datapath(name)
	if !ok {
		t.Fatalf("datapath %s not registered", name)
	}
	opts := map[string]any{}
	for _, f := range info.Options {
		if f.Default != nil {
			opts[f.Name] = f.Default
		}
	}
	return opts
}

// Testbed builds a local testbed from spec (Run is set here) and closes it at
// the end of the test, failing the test if anything of it is left behind.
func Testbed(t testing.TB, spec netns.Spec) *netns.Testbed {
	t.Helper()
	RequireRoot(t)
	spec.Run = runner.NewID()
	tb, err := netns.New(context.Background(), spec)
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
	return tb
}

// New makes the registered datapath name with opts (nil: defaults); a
// datapath this machine cannot run skips the test and says why.
func New(t testing.TB, name string, opts map[string]any) datapath.Datapath {
	t.Helper()
	RequireRoot(t)
	if opts == nil {
		opts = Defaults(t, name)
	}
	info, _ := plugins.Datapath(name)
	dp, err := info.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := dp.(datapath.Checker); ok {
		if err := c.Check(context.Background()); errors.Is(err, datapath.ErrNotSupported) {
			t.Skipf("this machine cannot run %s: %v", name, err)
		} else if errors.Is(err, datapath.ErrUnconfigured) {
			t.Skipf("%s needs a scenario to define it (its own tests do): %v", name, err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return dp
}

// Setup builds a testbed and sets up datapath name on it through
// datapath.Build (so a datapath that cannot run in spec's topology fails
// it); both are torn down when the test ends (link first).
func Setup(t testing.TB, spec netns.Spec, name string, opts map[string]any) (*netns.Testbed, *datapath.Link) {
	t.Helper()
	dp := New(t, name, opts)
	tb := Testbed(t, spec)
	link, err := datapath.Build(context.Background(), name, dp, tb)
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

// Run runs workload wl from the first site to the last through link (in
// the gateway topology, from the node behind the first to the node behind
// the last: see runner.Endpoints) and returns the result, or the error.
func Run(tb *netns.Testbed, link *datapath.Link, wl string, p results.Params, d, warm time.Duration) (*workload.Result, error) {
	info, ok := plugins.Workload(wl)
	if !ok {
		return nil, errors.New("workload " + wl + " not registered")
	}
	client, server, target := runner.Endpoints(tb, link, agent.DefaultPort)
	env := workload.Env{
		Client: client, Server: server, Port: agent.DefaultPort,
		Target: target,
		Params: p, Duration: d, Warmup: warm,
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+warm+30*time.Second)
	defer cancel()
	res, err := info.New().Run(ctx, env)
	if err == nil && link.Alive != nil {
		err = link.Alive()
	}
	return res, err
}

// MustRun is Run that fails the test on error.
func MustRun(t testing.TB, tb *netns.Testbed, link *datapath.Link, wl string, p results.Params, d, warm time.Duration) *workload.Result {
	t.Helper()
	res, err := Run(tb, link, wl, p, d, warm)
	if err != nil {
		t.Fatalf("%s: %v", wl, err)
	}
	return res
}

// CarriesAll runs stream, rr and crr through link for about a second each
// and checks that each measured something plausible.
func CarriesAll(t *testing.T, tb *netns.Testbed, link *datapath.Link) {
	t.Helper()
	if len(link.Components) == 0 {
		t.Error("datapath names no component")
	}
	st := MustRun(t, tb, link, "stream", results.Params{"message_size": int64(65536), "streams": int64(2)}, time.Second, 200*time.Millisecond)
	if bps := st.Metrics[results.ThroughputBPS]; bps < 10e6 {
		t.Errorf("stream throughput %.3g bit/s, want > 10 Mbit/s", bps)
	}
	if s := st.Series[results.ThroughputBPS]; len(s.Values) != 1 || s.Interval != 1 {
		t.Errorf("stream series %+v, want one 1 s bucket", s)
	}
	rr := MustRun(t, tb, link, "rr", results.Params{"request_size": int64(64), "response_size": int64(1024), "concurrency": int64(2)}, time.Second, 200*time.Millisecond)
	checkLatency(t, "rr", rr, results.TransactionsPerS, 2, 200)
	crr := MustRun(t, tb, link, "crr", results.Params{"request_size": int64(64), "response_size": int64(64), "concurrency": int64(1)}, time.Second, 200*time.Millisecond)
	checkLatency(t, "crr", crr, results.ConnectionsPerS, 1, 20)
}

func checkLatency(t *testing.T, name string, r *workload.Result, rate string, conc, minRate float64) {
	t.Helper()
	m := r.Metrics
	if m[rate] < minRate {
		t.Errorf("%s: %s = %.1f, want ≥ %.0f", name, rate, m[rate], minRate)
	}
	p50, p99, max := m[results.LatencyP50], m[results.LatencyP99], m[results.LatencyMax]
	if !(p50 > 0 && p50 <= p99 && p99 <= max && max < 1) {
		t.Errorf("%s: latency p50 %g p99 %g max %g: want 0 < p50 ≤ p99 ≤ max < 1 s", name, p50, p99, max)
	}
	if err := checkLittle(m[rate], m[results.LatencyMean], conc); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if r.Histogram == "" {
		t.Errorf("%s: no histogram", name)
	}
}

// Bounds of Little's law in a closed loop, as fractions of the concurrency:
// rate × mean latency is the mean number of transactions in flight, the
// concurrency less the share of time each client spends between
// transactions (recording a sample, for crr opening and closing the socket).
// Measured through every datapath here it is 0.95–1.00; a mean latency
// understated by 2× gives at most littleMax/2, below littleMin.
const (
	littleMin = 0.7
	littleMax = 1.05
)

// checkLittle says whether a closed loop's rate (per second) and mean
// latency (seconds) at concurrency conc obey Little's law.
func checkLittle(rate, mean, conc float64) error {
	n := rate * mean
	if !(n >= littleMin*conc && n <= littleMax*conc) {
		return fmt.Errorf("rate %.4g/s × mean latency %.3g s = %.2f in flight, want %.2f–%.2f (%.2f–%.2f × the concurrency %.0f, Little's law)",
			rate, mean, n, littleMin*conc, littleMax*conc, littleMin, littleMax, conc)
	}
	return nil
}

// Listen listens on addr inside site and hands every connection to handle,
// on its own goroutine, until the test ends. handle owns the connection.
func Listen(t testing.TB, site *netns.Site, addr netip.AddrPort, handle func(net.Conn)) {
	t.Helper()
	var ln net.Listener
	err := site.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}

// Serve listens on addr inside site and answers every connection with
// "ok\n", until the test ends.
func Serve(t testing.TB, site *netns.Site, addr netip.AddrPort) {
	t.Helper()
	Listen(t, site, addr, func(c net.Conn) {
		io.WriteString(c, "ok\n")
		c.Close()
	})
}

// Dial connects from inside site to a Serve listener at addr and reads its
// answer, all within timeout.
func Dial(site *netns.Site, addr netip.AddrPort, timeout time.Duration) error {
	return site.Do(func() error {
		deadline := time.Now().Add(timeout)
		c, err := net.DialTimeout("tcp", addr.String(), timeout)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if line != "ok\n" {
			return fmt.Errorf("unexpected answer %q", line)
		}
		return nil
	})
}

// AllReach serves port in every site and checks that every site reaches
// every other through link, each dial within timeout.
func AllReach(t *testing.T, tb *netns.Testbed, link *datapath.Link, port int, timeout time.Duration) {
	t.Helper()
	sites := tb.LocalSites()
	for _, s := range sites {
		Serve(t, s, AddrOf(t, link.Target(s, s, port)))
	}
	for _, from := range sites {
		for _, to := range sites {
			if from == to {
				continue
			}
			if err := Dial(from, AddrOf(t, link.Target(from, to, port)), timeout); err != nil {
				t.Errorf("%s → %s: %v", from.Name(), to.Name(), err)
			}
		}
	}
}

// AddrOf is target as an address; it fails the test when target is a name
// (local datapaths dial addresses).
func AddrOf(t testing.TB, target testbed.Target) netip.AddrPort {
	t.Helper()
	ap, ok := target.AddrPort()
	if !ok {
		t.Fatalf("target %s is not an address", target)
	}
	return ap
}
