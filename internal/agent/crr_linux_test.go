package agent

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// crr against a server that holds each response 2 ms measures connect plus
// that response: a p50 of 2 ms plus a loopback connect and round trip,
// which together take well under 0.3 ms.
func TestCRRLatencyKnownAnswer(t *testing.T) {
	const d = 2 * time.Millisecond
	addr := delayServer(t, func(time.Duration) time.Duration { return d })
	var m map[string]float64
	for try := 0; try < 2; try++ { // the machine is shared: one retry
		res, err := RunClient(ClientSpec{Mode: "crr", Target: addr, Duration: time.Second, Warmup: 100 * time.Millisecond,
			RequestSize: 64, ResponseSize: 64, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		m = res.Metrics
		t.Logf("crr: %.0f/s, p50 %.1f µs, p99 %.1f µs", m[results.ConnectionsPerS], m[results.LatencyP50]*1e6, m[results.LatencyP99]*1e6)
		if p50 := m[results.LatencyP50]; p50 >= d.Seconds() && p50 <= d.Seconds()+300e-6 {
			break
		}
	}
	if p50 := m[results.LatencyP50]; p50 < d.Seconds() || p50 > d.Seconds()+300e-6 {
		t.Errorf("p50 %.1f µs, want %v + up to 300 µs", p50*1e6, d)
	}
}

// crr's span starts at connect and ends with the response: a slow socket
// set-up before it (here 200 ms in setup) and a close(2) that blocks after
// it are outside. The close blocks for real: the server answers at once
// but never reads, with a small receive buffer, so the client's 512 KiB
// request stays unsent in its send buffer, and SO_LINGER of 1 s makes
// close wait for it.
func TestCRRSpanExcludesSocketAndClose(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return serr
	}}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	resp := make([]byte, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write(resp)
			t.Cleanup(func() { c.Close() })
		}
	}()
	addr := netip.MustParseAddrPort(ln.Addr().String())
	const setupDelay, linger = 200 * time.Millisecond, 1
	setup := func(fd int) error {
		time.Sleep(setupDelay)
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20); err != nil {
			return err
		}
		return unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: linger})
	}
	first := append(encodeHeader(ModeRR, 0, 512<<10, 64), make([]byte, 512<<10)...)
	start := time.Now()
	span, err := crrOnce(addr, first, make([]byte, 64), setup)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("span %v, wall %v", span, wall)
	if wall < setupDelay+time.Duration(linger)*time.Second*9/10 {
		t.Fatalf("the call took %v: the close did not block (want ≥ %v + ~%d s), so the test proves nothing", wall, setupDelay, linger)
	}
	if span > 50*time.Millisecond {
		t.Errorf("span %v, want under 50 ms: socket set-up or close is inside it", span)
	}
}
