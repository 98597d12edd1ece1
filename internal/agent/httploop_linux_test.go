package agent

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// The event loop's edge cases, each against a real server on loopback.

// A server that closes the connection after every response
// (Connection: close): the loop reconnects and counts no error.
func TestHTTPLoopServerCloses(t *testing.T) {
	body := bodyHandler(512, 0)
	addr := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		body.ServeHTTP(w, r)
	}), false)
	for _, rate := range []float64{0, 200} {
		m := runHTTP(t, HTTPClientSpec{Target: addr, Protocol: "http1", Rate: rate, Connections: 2, BodySize: 512,
			Duration: time.Second, Warmup: 100 * time.Millisecond})
		t.Logf("rate %g: %.0f/s errors %g", rate, m[MetricRequestsPerS], m[MetricErrors])
		if m[MetricErrors] != 0 || m["requests"] < 50 {
			t.Errorf("rate %g: errors %g, requests %g", rate, m[MetricErrors], m["requests"])
		}
	}
}

// An HTTP/2 server that allows two streams per connection: a closed loop
// asking for eight keeps two in flight, never more, and fails nothing.
func TestHTTPLoopRespectsMaxStreams(t *testing.T) {
	var cur, peak atomic.Int32
	body := bodyHandler(256, 0)
	srv, err := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		body.ServeHTTP(w, r)
	}), false)
	if err != nil {
		t.Fatal(err)
	}
	srv.HTTP2.MaxConcurrentStreams = 2
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	m := runHTTP(t, HTTPClientSpec{Target: netip.MustParseAddrPort(ln.Addr().String()), Protocol: "http2", Streams: 8,
		Connections: 1, BodySize: 256, Duration: time.Second, Warmup: 100 * time.Millisecond})
	t.Logf("%.0f/s, peak %d streams", m[MetricRequestsPerS], peak.Load())
	if m[MetricErrors] != 0 || peak.Load() != 2 {
		t.Errorf("errors %g, peak concurrent streams %d, want 0 and 2", m[MetricErrors], peak.Load())
	}
}

// A server that never answers every second request: those count as
// timeouts, not errors, and the others still succeed; on HTTP/1.1 the
// loop replaces the stuck connection (and the requests queued behind a
// stuck one wait for it, so fewer are sent).
func TestHTTPLoopTimeouts(t *testing.T) {
	for _, proto := range []string{"http1", "http2"} {
		t.Run(proto, func(t *testing.T) {
			var n atomic.Int64
			done := make(chan struct{})
			body := bodyHandler(128, 0)
			addr := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1)%2 == 0 {
					select {
					case <-done:
					case <-r.Context().Done():
					}
					return
				}
				body.ServeHTTP(w, r)
			}), false)
			defer close(done)
			m := runHTTP(t, HTTPClientSpec{Target: addr, Protocol: proto, Rate: 40, Connections: 1, BodySize: 128,
				Duration: time.Second, Timeout: 150 * time.Millisecond})
			t.Logf("requests %g timeouts %g errors %g", m["requests"], m[MetricTimeouts], m[MetricErrors])
			if m[MetricTimeouts] < 5 || m["requests"] < 5 || m[MetricErrors] != 0 {
				t.Errorf("requests %g timeouts %g errors %g; want ≥ 5, ≥ 5, 0", m["requests"], m[MetricTimeouts], m[MetricErrors])
			}
		})
	}
}

// Two event loops share eight connections and together hold the rate.
func TestHTTPLoopThreads(t *testing.T) {
	for _, proto := range []string{"http1", "http2"} {
		addr := startHTTP(t, bodyHandler(1024, 0), false)
		const rate = 1000
		m := runHTTP(t, HTTPClientSpec{Target: addr, Protocol: proto, Rate: rate, Connections: 8, Threads: 2,
			BodySize: 1024, Duration: time.Second, Warmup: 200 * time.Millisecond})
		if got := m[MetricRequestsPerS]; got < 0.99*rate || got > 1.01*rate || m[MetricErrors] != 0 {
			t.Errorf("%s: %.1f/s of %d/s, errors %g", proto, got, rate, m[MetricErrors])
		}
	}
}

// A hand-written HTTP/1.1 server that dribbles each response out a few
// bytes at a time, header folding-case and all: the loop's parser must
// reassemble it across reads.
func TestHTTPLoopSplitResponses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	resp := "HTTP/1.1 200 OK\r\nserver: dribble\r\nCONTENT-length: 300\r\n\r\n" + strings.Repeat("y", 300)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*net.TCPConn).SetNoDelay(true)
				br := bufio.NewReader(c)
				for {
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					for b := []byte(resp); len(b) > 0; {
						k := min(7, len(b))
						if _, err := c.Write(b[:k]); err != nil {
							return
						}
						b = b[k:]
						time.Sleep(20 * time.Microsecond)
					}
				}
			}()
		}
	}()
	m := runHTTP(t, HTTPClientSpec{Target: netip.MustParseAddrPort(ln.Addr().String()), Protocol: "http1",
		Connections: 2, BodySize: 300, Duration: 500 * time.Millisecond})
	if m[MetricErrors] != 0 || m["requests"] < 20 {
		t.Errorf("requests %g errors %g", m["requests"], m[MetricErrors])
	}
}

func TestParseH1Header(t *testing.T) {
	for _, tc := range []struct {
		in      string
		status  int
		length  int
		closing bool
		err     string
	}{
		{in: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n", status: 200, length: 12},
		{in: "HTTP/1.0 404 Not Found\r\ncontent-length:0\r\nConnection: close\r\n", status: 404, closing: true},
		{in: "HTTP/1.1 204 No Content\r\n", status: 204},
		{in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", err: "only Content-Length"},
		{in: "HTTP/1.1 200 OK\r\nServer: x\r\n", err: "without Content-Length"},
		{in: "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n", err: "bad"},
		{in: "SSH-2.0-OpenSSH\r\n", err: "bad status line"},
	} {
		status, length, closing, err := parseH1Header([]byte(tc.in))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
		case err != nil || status != tc.status || length != tc.length || closing != tc.closing:
			t.Errorf("%q: %d %d %v %v, want %d %d %v", tc.in, status, length, closing, err, tc.status, tc.length, tc.closing)
		}
	}
}

// A peer that is not an HTTP server fails the run with an error that says
// what came back.
func TestHTTPLoopNotHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
			c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n\r\n"))
			time.AfterFunc(time.Second, func() { c.Close() })
		}
	}()
	_, err = RunHTTPClient(context.Background(), HTTPClientSpec{Target: netip.MustParseAddrPort(ln.Addr().String()),
		Protocol: "http1", Connections: 1, Duration: 300 * time.Millisecond})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("SSH-2.0")) {
		t.Errorf("err %v, want one quoting the SSH banner", err)
	}
}

// Paced HTTP runs that their path cannot keep up with, as
// TestPacedOverloadCountsLate: one connection to a server that holds each
// response 2 ms and answers one request at a time (HTTP/2: one stream per
// connection), offered 1000/s for 2 s. Requests unsent at the window's end
// count as late (see overloadProblems), on the event loop (HTTP/1.1, h2c)
// and on net/http (HTTP/1.1 over TLS).
func TestHTTPOverloadCountsLate(t *testing.T) {
	const d, window, rate = 2 * time.Millisecond, 2 * time.Second, 1000.0
	for _, tc := range []struct {
		name, proto string
		tls         bool
	}{{"http1", "http1", false}, {"h2c", "http2", false}, {"tls-http1", "http1", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := newHTTPServer(bodyHandler(256, d), tc.tls)
			if err != nil {
				t.Fatal(err)
			}
			srv.HTTP2.MaxConcurrentStreams = 1
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if tc.tls {
				go srv.ServeTLS(ln, "", "")
			} else {
				go srv.Serve(ln)
			}
			t.Cleanup(func() { srv.Close() })
			spec := HTTPClientSpec{Target: netip.MustParseAddrPort(ln.Addr().String()), Protocol: tc.proto, TLS: tc.tls,
				Rate: rate, Connections: 1, BodySize: 256, Duration: window}
			checkOverload(t, func() map[string]float64 { return runHTTP(t, spec) }, MetricRequestsPerS, "requests", rate, d)
		})
	}
}

// Requests in flight when the window ends are waited for and count with
// their whole latency. An h2c server that takes many streams but answers
// one request at a time, each held 2 ms, offered 1000/s for 2 s on one
// connection: the loop sends every request on time, so about half are
// still queued in the server when the window ends. They are answered after
// it and counted, so more are answered than the window alone had room for
// (2 s / 2 ms); the last answer comes no sooner than sent × 2 ms after the
// start, so the max is at least that less the window (the last one's due
// time is within it), about 2 s. Every request due in the window is still
// accounted for, answered or late (the loop keeps at most 1000 streams in
// flight, so the last few wait unsent).
func TestHTTPInFlightAtEndCount(t *testing.T) {
	const d, window, rate = 2 * time.Millisecond, 2 * time.Second, 1000.0
	var mu sync.Mutex
	body := bodyHandler(256, 0)
	addr := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		holdFor(d)
		mu.Unlock()
		body.ServeHTTP(w, r)
	}), false)
	m := runHTTP(t, HTTPClientSpec{Target: addr, Protocol: "http2", Rate: rate, Connections: 1, BodySize: 256, Duration: window})
	answered, late, w := m["requests"], m[results.Late], m[results.DurationS]
	sent := answered + m[MetricErrors] + m[MetricTimeouts]
	t.Logf("answered %.0f failed %.0f late %.0f in %.3f s; p50 %.1f ms p99 %.1f ms max %.1f ms",
		answered, sent-answered, late, w, m[results.LatencyP50]*1e3, m[results.LatencyP99]*1e3, m[results.LatencyMax]*1e3)
	if m[MetricErrors] != 0 || m[MetricTimeouts] != 0 {
		t.Errorf("errors %g timeouts %g, want 0", m[MetricErrors], m[MetricTimeouts])
	}
	if due := rate * w; math.Abs(sent+late-due) > 2 {
		t.Errorf("answered + failed + late = %.0f, want rate × window = %.0f ± 2", sent+late, due)
	}
	if room := w / d.Seconds(); answered < 1.5*room {
		t.Errorf("answered %.0f, want well over the %.0f the window alone had room for: those in flight at its end count", answered, room)
	}
	if floor := sent*d.Seconds() - w; m[results.LatencyMax] < floor-0.001 {
		t.Errorf("max %.1f ms, want ≥ sent × d − window = %.1f ms", m[results.LatencyMax]*1e3, floor*1e3)
	}
}
