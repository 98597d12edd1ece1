package agent

import (
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
