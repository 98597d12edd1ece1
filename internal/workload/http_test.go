package workload_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/netns"
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

// server: nginx is refused with a clear error until it is built.
func TestHTTPNginxNotBuilt(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "native", nil)
	_, err := datapathtest.Run(tb, link, "http", results.Params{"protocol": "http1", "rate": 10.0, "server": "nginx"}, time.Second, 0)
	if err == nil || !strings.Contains(err.Error(), "not built yet") {
		t.Fatalf("server: nginx: got %v, want a \"not built yet\" error", err)
	}
}
