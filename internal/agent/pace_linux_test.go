package agent

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// delayServer serves rr on loopback like the agent server, but holds each
// response for delay(since), where since is the time from the first
// connection's header to the request's arrival.
func delayServer(t *testing.T, delay func(since time.Duration) time.Duration) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	var once sync.Once
	var first time.Time
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Blocking reads on a thread of its own, as the agent
				// server does; responses are held precisely (a Go timer
				// could add a millisecond).
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
				defer unix.Prctl(unix.PR_SET_TIMERSLACK, 50000, 0, 0, 0)
				rc, err := blockingFD(c.(*net.TCPConn), ioTimeout)
				if err != nil {
					c.Close()
					return
				}
				defer rc.close()
				defer reserveProcs(1)()
				rc.raw = true
				p := newPacer()
				hdr := make([]byte, headerLen)
				if rc.readFull(hdr) != nil {
					return
				}
				_, _, reqSize, respSize, err := decodeHeader(hdr)
				if err != nil {
					return
				}
				once.Do(func() { first = time.Now() })
				req, resp := make([]byte, reqSize), make([]byte, respSize)
				for {
					if rc.readFull(req) != nil {
						return
					}
					now := time.Now()
					if d := delay(now.Sub(first)); d > 0 {
						p.wait(now.Add(d), func() bool { return false })
					}
					if rc.writeFull(resp) != nil {
						return
					}
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

func rrSpec(target netip.AddrPort, rate float64, conns int, d time.Duration) ClientSpec {
	return ClientSpec{Mode: "rr", Target: target, Duration: d, Warmup: 200 * time.Millisecond,
		RequestSize: 64, ResponseSize: 64, Concurrency: conns, Rate: rate}
}

func logPaced(t *testing.T, name string, m map[string]float64) {
	t.Helper()
	t.Logf("%s: achieved %.1f/s of %g/s (sustained %g), latency p50 %.1f µs p99 %.1f µs, send lag p50 %.2f µs p99 %.1f µs, client CPU %.3f s",
		name, m[results.TransactionsPerS], m[results.TargetRate], m[results.Sustained],
		m[results.LatencyP50]*1e6, m[results.LatencyP99]*1e6,
		m[results.SendLagP50]*1e6, m[results.SendLagP99]*1e6, m["cpu_seconds_client"])
}

// At 2000/s against the agent server, a paced run achieves 2000/s.
func TestPacedRateKnownAnswer(t *testing.T) {
	addr := serve(t)
	const rate = 2000.0
	var m map[string]float64
	for try := 0; try < 2; try++ { // the machine is shared: one retry
		res, err := RunClient(rrSpec(addr, rate, 4, 2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m = res.Metrics
		logPaced(t, "2000/s", m)
		if got := m[results.TransactionsPerS]; got >= 0.98*rate && got <= 1.02*rate {
			break
		}
	}
	if got := m[results.TransactionsPerS]; got < 0.98*rate || got > 1.02*rate {
		t.Errorf("achieved %.1f/s, want %g/s ± 2%%", got, rate)
	}
	if m[results.TargetRate] != rate || m[results.Sustained] != 1 {
		t.Errorf("target_rate %g sustained %g, want %g and 1", m[results.TargetRate], m[results.Sustained], rate)
	}
}

// A 500 ms span in which every response stalls 200 ms shows in the
// corrected p99 of a paced run; a closed-loop run against the same server
// hides it (coordinated omission: the stalled connections stop sending).
func TestPacedCorrectsCoordinatedOmission(t *testing.T) {
	// The span starts 1.2 s after the first connection (warmup 0.2 s), well
	// inside each run's 3 s window.
	stall := func(since time.Duration) time.Duration {
		if since >= 1200*time.Millisecond && since < 1700*time.Millisecond {
			return 200 * time.Millisecond
		}
		return 0
	}
	res, err := RunClient(rrSpec(delayServer(t, stall), 1000, 4, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	open := res.Metrics
	logPaced(t, "paced 1000/s", open)
	spec := rrSpec(delayServer(t, stall), 0, 4, 3*time.Second)
	res, err = RunClient(spec)
	if err != nil {
		t.Fatal(err)
	}
	closed := res.Metrics
	t.Logf("closed loop: %.0f/s, p50 %.1f µs, p99 %.1f µs, max %.1f ms", closed[results.TransactionsPerS],
		closed[results.LatencyP50]*1e6, closed[results.LatencyP99]*1e6, closed[results.LatencyMax]*1e3)
	if p99 := open[results.LatencyP99]; p99 < 0.150 {
		t.Errorf("paced p99 %.1f ms, want ≥ 150 ms", p99*1e3)
	}
	if closed[results.LatencyMax] < 0.150 {
		t.Errorf("closed-loop max %.1f ms: the stall did not reach the closed-loop run", closed[results.LatencyMax]*1e3)
	}
	if closed[results.LatencyP99] >= open[results.LatencyP99] {
		t.Errorf("closed-loop p99 %.1f ms ≥ corrected p99 %.1f ms", closed[results.LatencyP99]*1e3, open[results.LatencyP99]*1e3)
	}
	if _, ok := closed[results.TargetRate]; ok {
		t.Error("closed loop reports target_rate")
	}
}

// A server that holds each response 2 ms, offered a rate it keeps up with,
// measures a p50 of 2–3 ms.
func TestPacedLatencyKnownAnswer(t *testing.T) {
	addr := delayServer(t, func(time.Duration) time.Duration { return 2 * time.Millisecond })
	var m map[string]float64
	for try := 0; try < 2; try++ {
		res, err := RunClient(rrSpec(addr, 400, 4, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m = res.Metrics
		logPaced(t, "2 ms server at 400/s", m)
		if p50 := m[results.LatencyP50]; p50 >= 0.002 && p50 <= 0.003 {
			break
		}
	}
	if p50 := m[results.LatencyP50]; p50 < 0.002 || p50 > 0.003 {
		t.Errorf("p50 %.3f ms, want 2–3 ms", p50*1e3)
	}
	if m[results.Sustained] != 1 {
		t.Errorf("not sustained: %.1f/s of 400/s", m[results.TransactionsPerS])
	}
}

func TestRateValidate(t *testing.T) {
	tgt := netip.MustParseAddrPort("127.0.0.1:1")
	ok := rrSpec(tgt, 100, 1, time.Second)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []ClientSpec{
		rrSpec(tgt, -1, 1, time.Second),
		{Mode: "crr", Target: tgt, Duration: time.Second, RequestSize: 1, ResponseSize: 1, Concurrency: 1, Rate: 10},
	} {
		if s.Validate() == nil {
			t.Errorf("%+v: want an error", s)
		}
	}
}

// overloadProblems checks the known answers of a paced run over one
// connection to a server that holds every response d, offered rate/s with
// no warmup, and returns what is wrong. The server answers at most one
// request per d, so the schedule runs ahead of it and a backlog grows
// until the window ends. With W the measured window (duration_s):
//   - Every request due in the window is accounted for: answered, failed or
//     late, rate × W of them (± 2 for the schedule's ends).
//   - At most W/d + 1 are answered.
//   - Request k is due at k/rate, and the connection sent requests 0 to
//     sent−1 (answered or failed). The first late one, due at sent/rate,
//     had waited W − sent/rate when the window ended: at least
//     W·(1 − 1/(rate·d)), about half the window here, since sent ≤ W/d + 1.
//     The last one sent, in flight at the end, waited 1/rate longer plus
//     the rest of its service: less than three mean service times
//     (W/sent) unless the machine stalled it. The max is the former, plus
//     at most the latter.
//   - The late requests' latencies are spread evenly from 0 to the first
//     one's, and they are more than a third of all (the server answers at
//     most half): their top 3% alone fill the top 1%, so p99 is at least
//     0.97 × the first late one's wait, however the server's speed varied.
//
// Before late requests were counted, half of the requests vanished.
func overloadProblems(m map[string]float64, countName string, rate float64, d time.Duration) []string {
	var bad []string
	answered, late, w := m[countName], m[results.Late], m[results.DurationS]
	sent := answered + m["errors"] + m["timeouts"]
	if due := rate * w; math.Abs(sent+late-due) > 2 {
		bad = append(bad, fmt.Sprintf("answered + failed + late = %.0f, want rate × window = %.0f ± 2", sent+late, due))
	}
	if m[results.LatencySamples] != answered+late {
		bad = append(bad, fmt.Sprintf("latency_samples %.0f, want answered + late = %.0f", m[results.LatencySamples], answered+late))
	}
	if most := w/d.Seconds() + 1; answered > most {
		bad = append(bad, fmt.Sprintf("answered %.0f, more than one per %s (%.0f)", answered, d, most))
	}
	firstLate := w - sent/rate
	floor := w * (1 - 1/(rate*d.Seconds()))
	slack := 1/rate + 3*w/sent
	top := m[results.LatencyMax]
	if top < firstLate-0.0005 || top > firstLate+slack {
		bad = append(bad, fmt.Sprintf("max %.1f ms, want the first late request's wait, window − sent/rate = %.1f ms, + up to %.1f ms for the one in flight",
			top*1e3, firstLate*1e3, slack*1e3))
	}
	if top < floor-0.0005 {
		bad = append(bad, fmt.Sprintf("max %.1f ms below the known floor window·(1 − 1/(rate·d)) = %.1f ms", top*1e3, floor*1e3))
	}
	if p99 := m[results.LatencyP99]; p99 < 0.97*firstLate {
		bad = append(bad, fmt.Sprintf("p99 %.1f ms, want ≥ 0.97 × %.1f ms", p99*1e3, firstLate*1e3))
	}
	return bad
}

// checkOverload runs a paced overload twice at most (the machine is
// shared: a stalled last request can break the max's upper bound) and
// fails the test with the last run's problems (overloadProblems).
func checkOverload(t *testing.T, run func() map[string]float64, rateName, countName string, rate float64, d time.Duration) {
	t.Helper()
	var bad []string
	for try := 0; try < 2; try++ {
		m := run()
		t.Logf("answered %.0f failed %.0f late %.0f in %.3f s; samples %.0f; p50 %.1f ms p99 %.1f ms max %.1f ms; %s %.1f/s",
			m[countName], m["errors"]+m["timeouts"], m[results.Late], m[results.DurationS], m[results.LatencySamples],
			m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3, m[results.LatencyMax]*1e3, rateName, m[rateName])
		if bad = overloadProblems(m, countName, rate, d); len(bad) == 0 {
			return
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// A paced rr run that its path cannot keep up with: one connection, a
// server that holds each response 2 ms (≤ 500/s), offered 1000/s for 2 s.
// The requests still unsent when the window ends count as late, with the
// backlog's latencies (see overloadProblems).
func TestPacedOverloadCountsLate(t *testing.T) {
	const d, window, rate = 2 * time.Millisecond, 2 * time.Second, 1000.0
	addr := delayServer(t, func(time.Duration) time.Duration { return d })
	spec := rrSpec(addr, rate, 1, window)
	spec.Warmup = 0
	var last map[string]float64
	checkOverload(t, func() map[string]float64 {
		res, err := RunClient(spec)
		if err != nil {
			t.Fatal(err)
		}
		last = res.Metrics
		return res.Metrics
	}, results.TransactionsPerS, "transactions", rate, d)
	if last[results.Sustained] != 0 || last[results.TransactionsPerS] > 0.6*rate {
		t.Errorf("sustained %g at %.1f/s of %g/s: late requests must not count as achieved", last[results.Sustained], last[results.TransactionsPerS], rate)
	}
}
