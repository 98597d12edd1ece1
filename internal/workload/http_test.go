package workload_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// The http workload through the native datapath: the agent's server in one
// site, its paced client in the other, over HTTP/1.1, h2c and HTTP/2 over
// TLS, at a small rate for a second each.
func TestHTTPNative(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "native", nil)
	for _, tc := range []struct {
		name, proto string
		tls         bool
	}{{"http1", "http1", false}, {"http2", "http2", false}, {"http2-tls", "http2", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const rate = 500
			res := datapathtest.MustRun(t, tb, link, "http", results.Params{
				"protocol": tc.proto, "tls": tc.tls, "rate": float64(rate), "connections": int64(4),
				"body_size": int64(4096), "path": "/x", "server": "builtin",
			}, time.Second, 200*time.Millisecond)
			m := res.Metrics
			t.Logf("%.1f/s of %d/s, p50 %.3fms p99 %.3fms p99.99 %.3fms, server CPU %.3fs",
				m[agent.MetricRequestsPerS], rate, m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3,
				m[agent.MetricLatencyP9999]*1e3, m[results.CPUSecondsServer])
			if got := m[agent.MetricRequestsPerS]; math.Abs(got/rate-1) > 0.02 {
				t.Errorf("achieved %.1f/s, want %d/s ± 2%%", got, rate)
			}
			if m[agent.MetricErrors] != 0 || m[agent.MetricTimeouts] != 0 || m[results.Sustained] != 1 {
				t.Errorf("errors %g timeouts %g sustained %g", m[agent.MetricErrors], m[agent.MetricTimeouts], m[results.Sustained])
			}
			if p50 := m[results.LatencyP50]; !(p50 > 0 && p50 < 0.01) {
				t.Errorf("p50 %gs", p50)
			}
			if res.Histogram == "" {
				t.Error("no histogram")
			}
		})
	}
}

// The http workload against Debian's nginx through the native datapath:
// HTTP/1.1, h2c, and both over TLS, at 500 requests/s for 2 s each. nginx
// keeps up: the achieved rate is the target within 2%, nothing fails, and
// its CPU (master and worker: the worker does the work) is counted.
func TestHTTPNginx(t *testing.T) {
	if err := workload.NginxTool.Check(); errors.Is(err, testbed.ErrNotSupported) {
		t.Skip(err)
	}
	tb, link := datapathtest.Setup(t, netns.Spec{}, "native", nil)
	for _, tc := range []struct {
		name, proto, path string
		tls               bool
	}{{"http1", "http1", "/", false}, {"http2", "http2", "/any/path", false}, {"http1-tls", "http1", workload.NginxBodyPath, true}, {"http2-tls", "http2", "/", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const rate = 500
			res := datapathtest.MustRun(t, tb, link, "http", results.Params{
				"protocol": tc.proto, "tls": tc.tls, "rate": float64(rate), "connections": int64(4),
				"body_size": int64(4096), "path": tc.path, "server": "nginx",
			}, 2*time.Second, 200*time.Millisecond)
			m := res.Metrics
			t.Logf("%.1f/s of %d/s, p50 %.3fms p99 %.3fms, CPU client %.3fs server %.3fs",
				m[agent.MetricRequestsPerS], rate, m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3,
				m[results.CPUSecondsClient], m[results.CPUSecondsServer])
			if got := m[agent.MetricRequestsPerS]; math.Abs(got/rate-1) > 0.02 {
				t.Errorf("achieved %.1f/s, want %d/s ± 2%%", got, rate)
			}
			if m[agent.MetricErrors] != 0 || m[agent.MetricTimeouts] != 0 || m[results.Sustained] != 1 {
				t.Errorf("errors %g timeouts %g sustained %g", m[agent.MetricErrors], m[agent.MetricTimeouts], m[results.Sustained])
			}
			// nginx's master sleeps; a server CPU of 0 would mean its
			// worker was not counted.
			if s, ok := m[results.CPUSecondsServer]; !ok || s <= 0 {
				t.Errorf("cpu_seconds_server %g (present %v), want > 0", s, ok)
			}
			if res.Histogram == "" {
				t.Error("no histogram")
			}
		})
	}
}

// A server delay is refused with nginx, before anything starts.
func TestHTTPNginxRefusesDelay(t *testing.T) {
	_, err := workload.HTTP{ServerDelay: time.Millisecond}.Run(t.Context(), workload.Env{Params: results.Params{"server": "nginx"}})
	if err == nil || !strings.Contains(err.Error(), "nginx") {
		t.Fatalf("got %v, want an error naming nginx", err)
	}
}
