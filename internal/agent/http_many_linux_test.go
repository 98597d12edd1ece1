package agent

import (
	"math"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// The container-network study's load shape (tcpkali: hundreds of
// connections, each at a constant share of the rate): 500 HTTP/1.1
// connections at 5000/s in all, 10/s each, against 350 B bodies. The
// achieved rate is the target within 1%, and the client's own pacing error
// does not show: the 99th percentile of how late requests left their
// schedule (send_lag_p99_s) is under 1 ms.
//
// The lag bound needs a machine that can pace at all: a control run at 8
// connections and the same rate comes first, and when even it is over
// 1 ms (a shared, loaded machine: the loop's thread waits for a core) the
// bound is not judged, and the test says so with both figures.
func TestHTTPManyConnectionsPacing(t *testing.T) {
	addr := startHTTP(t, bodyHandler(350, 0), false)
	const rate = 5000.0
	spec := func(conns int) HTTPClientSpec {
		return HTTPClientSpec{Target: addr, Protocol: "http1", Rate: rate, Connections: conns,
			BodySize: 350, Duration: 2 * time.Second, Warmup: 500 * time.Millisecond}
	}
	var m, ctl map[string]float64
	for try := 0; try < 2; try++ { // the machine is shared: one retry
		ctl = runHTTP(t, spec(8))
		m = runHTTP(t, spec(500))
		t.Logf("try %d: 500 connections: %.1f/s of %g/s, send lag p50 %.1f µs p99 %.1f µs, latency p50 %.3f ms p99 %.3f ms; control, 8 connections: send lag p99 %.1f µs",
			try, m[MetricRequestsPerS], rate, m[results.SendLagP50]*1e6, m[results.SendLagP99]*1e6,
			m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3, ctl[results.SendLagP99]*1e6)
		if math.Abs(m[MetricRequestsPerS]/rate-1) <= 0.01 && m[results.SendLagP99] < 1e-3 {
			break
		}
	}
	if got := m[MetricRequestsPerS]; math.Abs(got/rate-1) > 0.01 {
		t.Errorf("achieved %.1f/s, want %g/s ± 1%%", got, rate)
	}
	if m[MetricErrors] != 0 || m[MetricTimeouts] != 0 || m[results.Sustained] != 1 {
		t.Errorf("errors %g timeouts %g sustained %g", m[MetricErrors], m[MetricTimeouts], m[results.Sustained])
	}
	lag := m[results.SendLagP99]
	if lag > 0 && lag < 1e-3 {
		return
	}
	if c := ctl[results.SendLagP99]; c >= 1e-3 {
		t.Skipf("send_lag_p99_s not judged: the control at 8 connections lags %.3g s too (the machine is loaded); 500 connections: %.3g s", c, lag)
	}
	t.Errorf("send_lag_p99_s %.3g s at 500 connections, want under 1 ms (the control at 8 connections: %.3g s)", lag, ctl[results.SendLagP99])
}

// A paced loop is not woken by responses: at 10/s on one connection it
// sends, naps up to 50 ms (its longest sleep; the runtime's preemption
// signal ends it after about 10 ms) and only then reads the response. The
// latency still ends when the response arrived (the kernel's receive
// time): a server that answers at once gives a p50 well under a
// millisecond. Measured by the read, the p50 was 5–10 ms.
func TestPacedLatencyEndsAtArrival(t *testing.T) {
	addr := startHTTP(t, bodyHandler(64, 0), false)
	m := runHTTP(t, HTTPClientSpec{Target: addr, Protocol: "http1", Rate: 10, Connections: 1,
		BodySize: 64, Duration: time.Second})
	t.Logf("%.0f requests, latency p50 %.3f ms p99 %.3f ms", m["requests"], m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3)
	if m["requests"] < 9 {
		t.Fatalf("%.0f requests in 1 s at 10/s", m["requests"])
	}
	if p50 := m[results.LatencyP50]; p50 > 2e-3 {
		t.Errorf("latency p50 %.3f ms, want under 2 ms: the loop read the responses 5–50 ms late, and that must not count", p50*1e3)
	}
}
