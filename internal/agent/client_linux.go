package agent

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// ClientSpec says what one client run does.
type ClientSpec struct {
	// Mode is "stream", "rr" or "crr".
	Mode string
	// Target is the server's address as reachable from the client's site.
	Target netip.AddrPort
	// Duration is the measured time, after Warmup.
	Duration, Warmup time.Duration
	// Interval is the width of each series bucket; 0 means 1s.
	Interval time.Duration
	// MessageSize is the size of each write (stream).
	MessageSize int
	// Streams is the number of parallel connections (stream).
	Streams int
	// Congestion, when set, is the TCP congestion control of the stream
	// connections (TCP_CONGESTION: cubic, bbr, reno, …); empty keeps the
	// namespace's default, which a new namespace inherits from the host.
	Congestion string
	// RequestSize and ResponseSize are the transaction sizes (rr, crr).
	RequestSize, ResponseSize int
	// Concurrency is the number of connections (rr) or of parallel
	// connect–request–response–close loops (crr).
	Concurrency int
	// Rate, when > 0, makes rr open-loop: transactions per second across
	// all connections, each connection sending at Rate/Concurrency on a
	// fixed schedule, with latency measured from each request's intended
	// send time (wrk2 semantics); requests still unsent when the window
	// ends count as late (results.Late). 0 means closed loop.
	Rate float64
}

// Validate reports a spec a client cannot run.
func (s ClientSpec) Validate() error {
	switch {
	case s.Mode != "stream" && s.Mode != "rr" && s.Mode != "crr":
		return fmt.Errorf("agent: unknown mode %q", s.Mode)
	case !s.Target.IsValid():
		return errors.New("agent: no target")
	case s.Duration <= 0:
		return errors.New("agent: duration must be positive")
	case s.Mode == "stream" && (s.MessageSize < 1 || s.Streams < 1):
		return errors.New("agent: stream needs message size and streams ≥ 1")
	case s.Mode != "stream" && (s.RequestSize < 1 || s.ResponseSize < 1 || s.Concurrency < 1):
		return errors.New("agent: rr/crr need request size, response size and concurrency ≥ 1")
	case !(s.Rate >= 0) || math.IsInf(s.Rate, 0):
		return fmt.Errorf("agent: rate must be a finite number ≥ 0, got %g", s.Rate)
	case s.Rate > 0 && s.Mode != "rr":
		return fmt.Errorf("agent: rate applies to rr only, not %s", s.Mode)
	}
	return nil
}

// phases of a client run.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// clock runs the warmup, the measured window and the per-interval sampling,
// calling sample at the start of the window, at every interval and at the end.
type clock struct {
	phase atomic.Int32
	// end is when the measured window ended, set before the phase turns
	// to phaseStop at the window's end (not when a failure stops the run).
	end atomic.Pointer[time.Time]
	// originT is when paced schedules start (see origin); run sets it
	// once, then closes originSet.
	originOnce sync.Once
	originSet  chan struct{}
	originT    time.Time
	// start is when the measured window started; run's goroutine only.
	start time.Time
}

// window is the measured window's length, from the phase turning to
// phaseMeasure to its turning to phaseStop, for the goroutine that called
// run, after it returned. A request counts in the window when it was sent
// in it, so this is the time its requests were sent in; it falls back on
// run's own figure when the window did not end on time.
func (c *clock) window(ran time.Duration) time.Duration {
	if end, ok := c.ended(); ok {
		return end.Sub(c.start)
	}
	return ran
}

func (c *clock) initOrigin() { c.originOnce.Do(func() { c.originSet = make(chan struct{}) }) }

// origin waits for run to start and returns when paced schedules start:
// the warmup's start, or without a warmup the measured window's start,
// after the phase turned to phaseMeasure. So without a warmup, every
// request a schedule has due before the window's end is the window's:
// answered in it, or late at its end.
func (c *clock) origin() time.Time {
	c.initOrigin()
	<-c.originSet
	return c.originT
}

// ended returns when the measured window ended, and false when the run was
// stopped otherwise (a failure) or has not ended.
func (c *clock) ended() (time.Time, bool) {
	if t := c.end.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// run drives the phases. sample(i) is called with i = -1 at the window's
// start, then 0, 1, ... at each interval's end; the last call ends the window.
// It returns the measured window's length.
func (c *clock) run(spec ClientSpec, sample func(i int)) time.Duration {
	interval := spec.Interval
	if interval <= 0 {
		interval = time.Second
	}
	c.initOrigin()
	if spec.Warmup > 0 {
		c.originT = time.Now()
		close(c.originSet)
		time.Sleep(spec.Warmup)
	}
	start := time.Now()
	c.start = start
	sample(-1)
	c.phase.Store(phaseMeasure)
	if spec.Warmup <= 0 {
		c.originT = start
		close(c.originSet)
	}
	n := int((spec.Duration + interval - 1) / interval)
	for i := 0; i < n; i++ {
		next := start.Add(min(time.Duration(i+1)*interval, spec.Duration))
		time.Sleep(time.Until(next))
		if i == n-1 {
			end := time.Now()
			c.end.Store(&end)
			c.phase.Store(phaseStop)
		}
		sample(i)
	}
	return time.Since(start)
}

// RunClient runs one client and returns its result.
func RunClient(spec ClientSpec) (*Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	switch spec.Mode {
	case "stream":
		return runStream(spec)
	default:
		return runRR(spec)
	}
}

func cpuSeconds() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func runStream(spec ClientSpec) (*Result, error) {
	defer reserveProcs(spec.Streams)()
	conns, err := dialStreams(spec.Target, spec.Streams, spec.Congestion)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	var ck clock
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	buf := make([]byte, spec.MessageSize)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ck.phase.Load() != phaseStop {
				if err := c.writeFull(buf); err != nil {
					if ck.phase.Load() != phaseStop {
						errs[i] = fmt.Errorf("stream %d: write: %w", i, err)
					}
					return
				}
			}
		}()
	}
	// Throughput counts bytes the receiver acknowledged (tcpi_bytes_acked),
	// so data still queued in the sender's buffers is never counted.
	acked := func() (bytes, retrans, segs uint64) {
		for _, c := range conns {
			if ti, err := c.tcpInfo(); err == nil {
				bytes += ti.Bytes_acked
				retrans += uint64(ti.Total_retrans)
				segs += uint64(ti.Data_segs_out)
			}
		}
		return
	}
	var series []float64
	var b0, r0, s0, prevB uint64
	var cpu0 float64
	prevT := time.Now()
	var b1, r1, s1 uint64
	var cpu1 float64
	elapsed := ck.run(spec, func(i int) {
		b, r, sg := acked()
		now := time.Now()
		if i < 0 {
			b0, r0, s0, cpu0 = b, r, sg, cpuSeconds()
		} else {
			series = append(series, float64(b-prevB)*8/now.Sub(prevT).Seconds())
			b1, r1, s1, cpu1 = b, r, sg, cpuSeconds()
		}
		prevB, prevT = b, now
	})
	sndbuf := 0
	for _, c := range conns {
		sndbuf = max(sndbuf, c.sendBuffer())
		c.shutdownWrite()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Result{
		Metrics: map[string]float64{
			results.SendBufferBytes: float64(sndbuf),
			results.TCPRmemMaxBytes: tcpRmemMax(),
			results.ThroughputBPS:   float64(b1-b0) * 8 / elapsed.Seconds(),
			results.Retransmits:     float64(r1 - r0),
			results.RetransmitRate:  float64(r1-r0) / max(float64(s1-s0), 1),
			"cpu_seconds_client":    cpu1 - cpu0,
			"bytes":                 float64(b1 - b0),
			"duration_s":            elapsed.Seconds(),
		},
		Series: map[string]results.Series{results.ThroughputBPS: {Interval: interval(spec), Values: series}},
	}, nil
}

func interval(spec ClientSpec) float64 {
	if spec.Interval <= 0 {
		return 1
	}
	return spec.Interval.Seconds()
}

// paddedCounter keeps each worker's count on its own cache line.
type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(60*time.Second), 3) }

// runRR runs rr (persistent connections; paced when spec.Rate > 0, see
// pacedConn) and crr (a new connection per transaction).
func runRR(spec ClientSpec) (*Result, error) {
	crr := spec.Mode == "crr"
	defer reserveProcs(spec.Concurrency)()
	flags := flagPersistent
	if crr {
		flags = 0
	}
	hdr := encodeHeader(ModeRR, flags, uint32(spec.RequestSize), uint32(spec.ResponseSize))
	var conns []*rawConn
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	if !crr {
		for i := 0; i < spec.Concurrency; i++ {
			c, err := dial(spec.Target, ioTimeout, true)
			if err != nil {
				return nil, err
			}
			c.raw = true
			conns = append(conns, c)
			if err := c.writeFull(hdr); err != nil {
				return nil, fmt.Errorf("rr header: %w", err)
			}
		}
	}
	var ck clock
	counters := make([]paddedCounter, spec.Concurrency)
	hists := make([]*hdrhistogram.Histogram, spec.Concurrency)
	errs := make([]error, spec.Concurrency)
	var wg sync.WaitGroup
	paced := spec.Rate > 0
	var lags []*hdrhistogram.Histogram
	lates := make([]uint64, spec.Concurrency)
	if paced {
		lags = make([]*hdrhistogram.Histogram, spec.Concurrency)
		for i := 0; i < spec.Concurrency; i++ {
			hists[i], lags[i] = newHist(), newHist()
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := pacedConn{c: conns[i], t0: ck.origin(), rate: spec.Rate, nconn: spec.Concurrency, index: i,
					req: make([]byte, spec.RequestSize), resp: make([]byte, spec.ResponseSize),
					hist: hists[i], lag: lags[i], count: &counters[i].n, late: &lates[i]}
				if err := w.run(&ck); err != nil {
					errs[i] = fmt.Errorf("rr %d: %w", i, err)
					ck.phase.Store(phaseStop)
				}
			}()
		}
	}
	// Closed loop: each connection sends as soon as its previous response
	// is in.
	for i := 0; i < spec.Concurrency && !paced; i++ {
		hists[i] = newHist()
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := make([]byte, spec.RequestSize)
			resp := make([]byte, spec.ResponseSize)
			first := append(append([]byte(nil), hdr...), req...)
			h, cnt := hists[i], &counters[i].n
			for {
				ph := ck.phase.Load()
				if ph == phaseStop {
					return
				}
				var d time.Duration
				var err error
				if crr {
					d, err = crrOnce(spec.Target, first, resp, nil)
				} else {
					t0 := time.Now()
					c := conns[i]
					if err = c.writeFull(req); err == nil {
						err = c.readFull(resp)
					}
					d = time.Since(t0)
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s %d: %w", spec.Mode, i, err)
					ck.phase.Store(phaseStop)
					return
				}
				if ph == phaseMeasure {
					h.RecordValue(int64(d))
					cnt.Add(1)
				}
			}
		}()
	}
	total := func() (n uint64) {
		for i := range counters {
			n += counters[i].n.Load()
		}
		return
	}
	var series []float64
	var prev uint64
	var cpu0, cpu1 float64
	prevT := time.Now()
	ran := ck.run(spec, func(i int) {
		n, now := total(), time.Now()
		if i < 0 {
			cpu0 = cpuSeconds()
		} else {
			series = append(series, float64(n-prev)/now.Sub(prevT).Seconds())
			cpu1 = cpuSeconds()
		}
		prev, prevT = n, now
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	merged := newHist()
	for _, h := range hists {
		merged.Merge(h)
	}
	var late uint64
	for _, n := range lates {
		late += n
	}
	elapsed := ck.window(ran)
	answered := total()
	if answered == 0 {
		return nil, fmt.Errorf("%s: no transaction completed in %s", spec.Mode, spec.Duration)
	}
	rateName := results.TransactionsPerS
	if crr {
		rateName = results.ConnectionsPerS
	}
	m, missing := latencyMetrics(merged)
	m[rateName] = float64(answered) / elapsed.Seconds()
	m["cpu_seconds_client"] = cpu1 - cpu0
	m["transactions"] = float64(answered)
	m["duration_s"] = elapsed.Seconds()
	if paced {
		lag := newHist()
		for _, h := range lags {
			lag.Merge(h)
		}
		pacedMetrics(m, rateName, spec.Rate, lag)
		m[results.Late] = float64(late)
	}
	enc, err := merged.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	return &Result{
		Metrics:   m,
		Series:    map[string]results.Series{rateName: {Interval: interval(spec), Values: series}},
		Histogram: string(enc),
		Missing:   missing,
	}, nil
}

// crrOnce makes one crr transaction on a new connection, sending the
// header and one request and reading the response, and returns its
// latency: from the start of connect to the response's last byte. Making
// the socket (socket(2), its options) before and close(2) after are not in
// it. setup, when not nil, runs on the socket before the clock starts.
func crrOnce(target netip.AddrPort, first, resp []byte, setup func(fd int) error) (time.Duration, error) {
	c, err := newSocket(target, ioTimeout, true)
	if err != nil {
		return 0, err
	}
	c.raw = true
	defer c.close()
	if setup != nil {
		if err := setup(c.fd); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	if err := c.connect(target); err != nil {
		return 0, err
	}
	if err := c.writeFull(first); err != nil {
		return 0, err
	}
	if err := c.readFull(resp); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// pacedMetrics adds what an open-loop run reports: the target rate, whether
// the achieved rate (m[rateName]) sustained it, and the sends' lag behind
// their intended times.
func pacedMetrics(m map[string]float64, rateName string, target float64, lag *hdrhistogram.Histogram) {
	m[results.TargetRate] = target
	m[results.Sustained] = 0
	if m[rateName] >= results.SustainedFraction*target {
		m[results.Sustained] = 1
	}
	if lag.TotalCount() > 0 {
		m[results.SendLagP50] = float64(lag.ValueAtQuantile(50)) / 1e9
		m[results.SendLagP99] = float64(lag.ValueAtQuantile(99)) / 1e9
	}
}

// latencyMetrics turns a histogram in nanoseconds into latency metrics in
// seconds, with its sample count. A tail percentile with too few samples
// behind it (results.TailMinSamples) is left out, and missing says why.
func latencyMetrics(h *hdrhistogram.Histogram) (m map[string]float64, missing map[string]string) {
	m = results.LatencyMetrics(h)
	return m, results.DropThinTails(m, nil)
}

// tcpRmemMax is the most a receive buffer autotunes to in this network
// namespace (the third field of net.ipv4.tcp_rmem); 0 if unreadable.
func tcpRmemMax() float64 {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[2], 64)
	return v
}
