package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// Metric names of the http client beyond the shared ones in results.
const (
	// MetricRequestsPerS is the achieved rate: requests completed with a
	// full, successful response per second of the measured window.
	MetricRequestsPerS = results.RequestsPerS
	// MetricErrors counts measured requests that failed other than by timeout
	// (connection errors, a status other than 200, a short body).
	MetricErrors = results.Errors
	// MetricTimeouts counts measured requests that hit the request timeout.
	MetricTimeouts = results.Timeouts
	// MetricLatencyP9999 is the 99.99th latency percentile in seconds.
	MetricLatencyP9999 = results.LatencyP9999
)

// HTTPServerSpec says what `spanperf agent http-serve` serves.
type HTTPServerSpec struct {
	// Listen is the address to listen on; empty means ":7100".
	Listen string
	// TLS serves HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with a self-signed
	// certificate made in memory for this process; otherwise cleartext
	// HTTP/1.1 and HTTP/2 with prior knowledge (h2c).
	TLS bool
	// BodySize is the size of every response body in bytes.
	BodySize int
	// Delay holds every response this long before it is written (sleeping,
	// then spinning the last holdSpin for precision).
	Delay time.Duration
}

// Validate reports a spec the server cannot serve.
func (s HTTPServerSpec) Validate() error {
	if s.BodySize < 0 || s.Delay < 0 {
		return errors.New("agent http-serve: body size and delay must be ≥ 0")
	}
	return nil
}

// bodyHandler answers every request with size bytes after delay.
func bodyHandler(size int, delay time.Duration) http.Handler {
	body := make([]byte, size)
	for i := range body {
		body[i] = 'x'
	}
	n := strconv.Itoa(size)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if delay > 0 {
			holdFor(delay)
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/octet-stream"}
		h["Content-Length"] = []string{n}
		w.Write(body)
	})
}

// holdSpin is how much of a held response's delay is spun rather than
// slept: a Go timer can wake a millisecond late on a busy machine.
const holdSpin = 500 * time.Microsecond

// holdFor returns d from now, precisely: it sleeps most of d and yields the
// rest, so each held response costs up to holdSpin of CPU.
func holdFor(d time.Duration) {
	due := time.Now().Add(d)
	if d > holdSpin {
		time.Sleep(d - holdSpin)
	}
	for time.Now().Before(due) {
		runtime.Gosched()
	}
}

// newHTTPServer makes a server of h for every protocol the agent speaks:
// HTTP/1.1, h2c with prior knowledge and, with tlsOn, HTTP/2 over TLS.
func newHTTPServer(h http.Handler, tlsOn bool) (*http.Server, error) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ioTimeout, IdleTimeout: 2 * ioTimeout}
	var p http.Protocols
	p.SetHTTP1(true)
	if tlsOn {
		cert, err := selfSignedCert()
		if err != nil {
			return nil, err
		}
		p.SetHTTP2(true)
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	srv.Protocols = &p
	// A benchmark client opens many streams at once: allow them.
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	return srv, nil
}

// selfSignedCert makes a P-256 certificate for this run only; it lives in
// memory and is never written out.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "spanperf agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"spanperf-agent"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// ServeHTTP runs `spanperf agent http-serve`: it listens, prints one Ready
// line on stdout and serves until the process is stopped.
func ServeHTTP(spec HTTPServerSpec, stdout io.Writer) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.Listen == "" {
		spec.Listen = ":" + strconv.Itoa(DefaultPort)
	}
	srv, err := newHTTPServer(bodyHandler(spec.BodySize, spec.Delay), spec.TLS)
	if err != nil {
		return fmt.Errorf("agent http-serve: %w", err)
	}
	ln, err := net.Listen("tcp", spec.Listen)
	if err != nil {
		return fmt.Errorf("agent http-serve: %w", err)
	}
	if err := json.NewEncoder(stdout).Encode(Ready{Ready: true, Addr: ln.Addr().String()}); err != nil {
		ln.Close()
		return err
	}
	if spec.TLS {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	return fmt.Errorf("agent http-serve: %w", err)
}

// HTTPClientSpec says what one `spanperf agent http` run does.
type HTTPClientSpec struct {
	// Target is the server's address as reachable from the client's site.
	Target netip.AddrPort
	// Protocol is "http1" (HTTP/1.1) or "http2" (h2c, or HTTP/2 over TLS
	// with TLS).
	Protocol string
	// TLS speaks HTTPS; the server's certificate is not verified (the
	// agent server's is self-signed per run).
	TLS bool
	// Path is the request path; empty means "/".
	Path string
	// Rate is the offered rate in requests per second across all
	// connections: request k of connection i is due at
	// t0 + (i + k·Connections)/Rate and its latency runs from that due
	// time (wrk2's correction for coordinated omission). 0 means closed
	// loop: each connection sends its next request when the previous
	// response is in, latency from the actual send. A paced run's
	// requests still unsent when the window ends count as late
	// (results.Late), into the histogram with their wait so far.
	Rate float64
	// Connections is the number of TCP connections. HTTP/1.1 has one
	// request in flight per connection (a late connection sends at once
	// when free, never skipping a request); HTTP/2 sends each request on
	// its connection at its due time, however many are in flight.
	Connections int
	// BodySize is the response body size expected; a response of another
	// size counts as an error.
	BodySize int
	// Duration is the measured time, after Warmup.
	Duration, Warmup time.Duration
	// Interval is the width of each series bucket; 0 means 1s.
	Interval time.Duration
	// Timeout bounds each request; 0 means 10s. Requests that hit it count
	// as timeouts.
	Timeout time.Duration
	// Streams is how many requests each HTTP/2 connection keeps in flight
	// in a closed loop (h2load -m); 0 means 1. HTTP/1.1 takes 1 only.
	Streams int
	// Threads is the number of event loops, each on its own thread,
	// sharing the connections (wrk -t); 0 means 1. TLS ignores it.
	Threads int
}

// Validate reports a spec the client cannot run.
func (s HTTPClientSpec) Validate() error {
	switch {
	case !s.Target.IsValid():
		return errors.New("agent http: no target")
	case s.Protocol != "http1" && s.Protocol != "http2":
		return fmt.Errorf("agent http: protocol must be http1 or http2, not %q", s.Protocol)
	case s.Duration <= 0:
		return errors.New("agent http: duration must be positive")
	case s.Connections < 1:
		return errors.New("agent http: connections must be ≥ 1")
	case s.BodySize < 0 || s.Timeout < 0 || s.Warmup < 0 || s.Streams < 0 || s.Threads < 0:
		return errors.New("agent http: body size, timeout, warmup, streams and threads must be ≥ 0")
	case s.Streams > 1 && s.Protocol == "http1":
		return errors.New("agent http: HTTP/1.1 has one request in flight per connection; streams > 1 needs http2")
	case s.Streams > 1 && s.Rate > 0:
		return errors.New("agent http: streams sets a closed loop's concurrency; a paced run sends each request at its due time")
	case !(s.Rate >= 0) || math.IsInf(s.Rate, 0):
		return fmt.Errorf("agent http: rate must be a finite number ≥ 0, got %g", s.Rate)
	}
	return nil
}

// httpClient is one connection's client: its own Transport, so requests on
// it share exactly one TCP connection.
func newConnClient(s HTTPClientSpec) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: ioTimeout}).DialContext,
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
		// The agent server's certificate is made per run; there is
		// nothing to verify it against.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		// StrictMaxConcurrentRequests keeps HTTP/2 on one connection:
		// extra streams wait rather than open another.
		HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true},
	}
	var p http.Protocols
	switch {
	case s.Protocol == "http1":
		p.SetHTTP1(true)
	case s.TLS:
		p.SetHTTP2(true)
	default:
		p.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &p
	return &http.Client{Transport: tr, Timeout: s.Timeout}
}

// httpTally holds one connection's measurements.
type httpTally struct {
	mu             sync.Mutex
	hist, lag      *hdrhistogram.Histogram
	errs, timeouts uint64
	late           uint64
	firstErr       error
	ok             atomic.Uint64
}

func (t *httpTally) record(lat, lag time.Duration, waited bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.timeouts++
		} else {
			t.errs++
		}
		if t.firstErr == nil {
			t.firstErr = err
		}
		return
	}
	t.hist.RecordValue(min(max(int64(lat), 1), t.hist.HighestTrackableValue()))
	if waited {
		t.lag.RecordValue(min(max(int64(lag), 1), t.lag.HighestTrackableValue()))
	}
	t.ok.Add(1)
}

// doRequest sends one GET and reads the whole body.
func doRequest(c *http.Client, url string, bodySize int) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %s", resp.Status)
	case n != int64(bodySize):
		return fmt.Errorf("body of %d bytes, want %d", n, bodySize)
	}
	return nil
}

// httpTotals is what an engine measured: latencies and pacing errors in
// ns, failures, and the first failure's error.
type httpTotals struct {
	hist, lag            *hdrhistogram.Histogram
	errs, timeouts, late uint64
	firstErr             error
}

func (t *httpTotals) add(hist, lag *hdrhistogram.Histogram, errs, timeouts, late uint64, firstErr error) {
	t.hist.Merge(hist)
	t.lag.Merge(lag)
	t.errs += errs
	t.timeouts += timeouts
	t.late += late
	if t.firstErr == nil {
		t.firstErr = firstErr
	}
}

// httpEngine sends a run's requests: connected before the clock starts,
// started at the clock's origin, counted live by the sampler, and waited
// for at the end.
type httpEngine interface {
	start(ck *clock)
	completed() uint64
	wait() httpTotals
}

// RunHTTPClient runs one http client and returns its result. Cleartext
// HTTP/1.1 and h2c run on the event loops (httploop_linux.go); TLS runs
// on net/http.
func RunHTTPClient(ctx context.Context, s HTTPClientSpec) (*Result, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Path == "" {
		s.Path = "/"
	}
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	s.Streams = max(s.Streams, 1)
	s.Threads = max(min(s.Threads, s.Connections), 1)
	var eng httpEngine
	var err error
	if s.TLS {
		eng, err = newNetHTTPEngine(ctx, s)
	} else {
		eng, err = newLoopEngine(s)
	}
	if err != nil {
		return nil, err
	}
	var ck clock
	eng.start(&ck)
	var series []float64
	var prev uint64
	var cpu0, cpu1 float64
	prevT := time.Now()
	ran := ck.run(ClientSpec{Duration: s.Duration, Warmup: s.Warmup, Interval: s.Interval}, func(i int) {
		n, now := eng.completed(), time.Now()
		if i < 0 {
			cpu0 = cpuSeconds()
		} else {
			series = append(series, float64(n-prev)/now.Sub(prevT).Seconds())
			cpu1 = cpuSeconds()
		}
		prev, prevT = n, now
	})
	// Requests sent in the window count even when they end after it:
	// dropping them would hide the slowest.
	t := eng.wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	elapsed := ck.window(ran)
	answered := t.hist.TotalCount() - int64(t.late)
	if answered <= 0 {
		if t.firstErr != nil {
			return nil, fmt.Errorf("agent http: no request succeeded in %s: %w", s.Duration, t.firstErr)
		}
		return nil, fmt.Errorf("agent http: no request completed in %s", s.Duration)
	}
	m, missing := latencyMetrics(t.hist)
	m[MetricRequestsPerS] = float64(answered) / elapsed.Seconds()
	m[MetricErrors] = float64(t.errs)
	m[MetricTimeouts] = float64(t.timeouts)
	m["requests"] = float64(answered)
	m["cpu_seconds_client"] = cpu1 - cpu0
	m["duration_s"] = elapsed.Seconds()
	if s.Rate > 0 {
		pacedMetrics(m, MetricRequestsPerS, s.Rate, t.lag)
		m[results.Late] = float64(t.late)
	}
	enc, err := t.hist.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	return &Result{
		Metrics:   m,
		Series:    map[string]results.Series{MetricRequestsPerS: {Interval: interval(ClientSpec{Interval: s.Interval}), Values: series}},
		Histogram: string(enc),
		Missing:   missing,
	}, nil
}

// loopEngine runs Threads event loops; loop l owns the connections whose
// number is l modulo Threads.
type loopEngine struct {
	loops   []*httpLoop
	wg      sync.WaitGroup
	release func()
}

func newLoopEngine(s HTTPClientSpec) (*loopEngine, error) {
	e := &loopEngine{}
	for l := 0; l < s.Threads; l++ {
		var idx []int
		for i := l; i < s.Connections; i += s.Threads {
			idx = append(idx, i)
		}
		lp, err := newHTTPLoop(s, idx)
		if err != nil {
			for _, x := range e.loops {
				x.close()
			}
			return nil, fmt.Errorf("agent http: %w", err)
		}
		e.loops = append(e.loops, lp)
	}
	return e, nil
}

func (e *loopEngine) start(ck *clock) {
	e.release = reserveProcs(len(e.loops))
	for _, lp := range e.loops {
		lp.ck = ck
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			lp.origin = ck.origin()
			lp.run()
		}()
	}
}

func (e *loopEngine) completed() (n uint64) {
	for _, lp := range e.loops {
		n += lp.ok.Load()
	}
	return n
}

func (e *loopEngine) wait() httpTotals {
	e.wg.Wait()
	e.release()
	t := httpTotals{hist: newHist(), lag: newHist()}
	for _, lp := range e.loops {
		lp.close()
		t.add(lp.hist, lp.lag, lp.errs, lp.timeouts, lp.late, lp.firstErr)
	}
	return t
}

// netHTTPEngine is net/http's client, one Transport per connection: the
// TLS path. HTTP/1.1 has one request in flight per connection; HTTP/2
// sends each request at its due time on its connection's goroutine.
type netHTTPEngine struct {
	ctx      context.Context
	s        HTTPClientSpec
	url      string
	clients  []*http.Client
	tallies  []*httpTally
	wg, infl sync.WaitGroup
	release  func()
}

func newNetHTTPEngine(ctx context.Context, s HTTPClientSpec) (*netHTTPEngine, error) {
	scheme := "http"
	if s.TLS {
		scheme = "https"
	}
	e := &netHTTPEngine{ctx: ctx, s: s, url: scheme + "://" + s.Target.String() + s.Path}
	for i := 0; i < s.Connections; i++ {
		c := newConnClient(s)
		e.clients = append(e.clients, c)
		e.tallies = append(e.tallies, &httpTally{hist: newHist(), lag: newHist()})
		// Connect before the clock starts, so the first due requests do
		// not pay for the handshake.
		if err := doRequest(c, e.url, s.BodySize); err != nil {
			e.closeIdle()
			return nil, fmt.Errorf("agent http: first request: %w", err)
		}
	}
	return e, nil
}

func (e *netHTTPEngine) closeIdle() {
	for _, c := range e.clients {
		c.CloseIdleConnections()
	}
}

func (e *netHTTPEngine) start(ck *clock) {
	s := e.s
	paced := s.Rate > 0
	e.release = reserveProcs(s.Connections)
	for i := range e.clients {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			c, tally := e.clients[i], e.tallies[i]
			if !paced {
				for {
					ph := ck.phase.Load()
					if ph == phaseStop || e.ctx.Err() != nil {
						return
					}
					start := time.Now()
					err := doRequest(c, e.url, s.BodySize)
					if ph == phaseMeasure {
						tally.record(time.Since(start), 0, false, err)
					}
				}
			}
			// As pacedConn: a thread of its own with fine timer slack,
			// left to end with the goroutine.
			runtime.LockOSThread()
			unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
			p := newPacer()
			stopped := func() bool { return ck.phase.Load() == phaseStop }
			t0 := ck.origin()
			dueNs := func(k int64) int64 { return int64(float64(int64(i)+k*int64(s.Connections)) / s.Rate * 1e9) }
			for k := int64(0); ; k++ {
				due := t0.Add(time.Duration(dueNs(k)))
				waited := p.wait(due, stopped)
				sent := time.Now()
				ph := ck.phase.Load()
				if ph == phaseStop || e.ctx.Err() != nil {
					if end, ok := ck.ended(); ok {
						tally.mu.Lock()
						tally.late = recordLate(tally.hist, k, dueNs, int64(end.Sub(t0)))
						tally.mu.Unlock()
					}
					return
				}
				one := func() {
					err := doRequest(c, e.url, s.BodySize)
					if ph == phaseMeasure {
						tally.record(time.Since(due), sent.Sub(due), waited, err)
					}
				}
				if s.Protocol == "http1" {
					one()
					continue
				}
				e.infl.Add(1)
				go func() {
					defer e.infl.Done()
					one()
				}()
			}
		}()
	}
}

func (e *netHTTPEngine) completed() (n uint64) {
	for _, t := range e.tallies {
		n += t.ok.Load()
	}
	return n
}

func (e *netHTTPEngine) wait() httpTotals {
	e.wg.Wait()
	e.infl.Wait()
	e.release()
	e.closeIdle()
	t := httpTotals{hist: newHist(), lag: newHist()}
	for _, x := range e.tallies {
		t.add(x.hist, x.lag, x.errs, x.timeouts, x.late, x.firstErr)
	}
	return t
}

// httpMain runs the http-serve and http subcommands of Main.
func httpMain(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "http-serve":
		var s HTTPServerSpec
		fs := flag.NewFlagSet("agent http-serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&s.Listen, "listen", ":"+strconv.Itoa(DefaultPort), "address to listen on")
		fs.BoolVar(&s.TLS, "tls", false, "serve HTTPS with a self-signed certificate made for this run")
		fs.IntVar(&s.BodySize, "body-size", 0, "response body bytes")
		fs.DurationVar(&s.Delay, "delay", 0, "hold every response this long")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if err := ServeHTTP(s, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	default:
		var s HTTPClientSpec
		var target string
		fs := flag.NewFlagSet("agent http", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&target, "target", "", "server HOST:PORT (an address, or a name looked up once before the run)")
		fs.StringVar(&s.Protocol, "protocol", "http1", "http1 or http2 (h2c, or HTTP/2 over TLS with --tls)")
		fs.BoolVar(&s.TLS, "tls", false, "speak HTTPS")
		fs.StringVar(&s.Path, "path", "/", "request path")
		fs.Float64Var(&s.Rate, "rate", 0, "offered requests/s across all connections, latency from the intended send time (0: closed loop)")
		fs.IntVar(&s.Connections, "connections", 1, "TCP connections")
		fs.IntVar(&s.BodySize, "body-size", 0, "expected response body bytes")
		fs.DurationVar(&s.Duration, "duration", 0, "measured time")
		fs.DurationVar(&s.Warmup, "warmup", 0, "time before measuring")
		fs.DurationVar(&s.Interval, "interval", 0, "series bucket width (default 1s)")
		fs.DurationVar(&s.Timeout, "timeout", 0, "per-request timeout (default 10s)")
		fs.IntVar(&s.Streams, "streams", 1, "HTTP/2 requests in flight per connection in a closed loop")
		fs.IntVar(&s.Threads, "threads", 1, "event loops (threads) sharing the connections")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		return clientMain("http", target, stdout, stderr, func(addr netip.AddrPort) (*Result, error) {
			s.Target = addr
			return RunHTTPClient(context.Background(), s)
		})
	}
}
