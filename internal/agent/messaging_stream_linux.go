package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// StreamHeaderSize is the smallest body of a stream message: its
// sequence number and its intended send time (Unix nanoseconds), each 8
// bytes, little endian.
const StreamHeaderSize = 16

// MessagingStreamSpec says what one `spanperf agent messaging-stream` run
// does: one producer appends messages to a RabbitMQ stream at a paced
// rate, and consumers, each on its own connection and reading the whole
// stream from where the run starts, receive every one.
type MessagingStreamSpec struct {
	// Target is the broker's stream port as reachable from the client's
	// site. Every connection (the locator's, the producer's, each
	// consumer's) dials it, whatever host the broker advertises.
	Target netip.AddrPort
	// Rate is the offered messages per second: message k is due at
	// t0 + k/Rate and carries that time; its latency at each consumer is
	// its arrival there minus that time (coordinated omission corrected,
	// as the http client's).
	Rate float64
	// Consumers is the number of consumers, each with its own connection
	// and offset ("next": what is appended after it subscribed); 0 means 1.
	Consumers int
	// BodySize is each message's body, at least StreamHeaderSize; a
	// message of another size is an error.
	BodySize int
	// Duration is the measured time, after Warmup.
	Duration, Warmup time.Duration
	// Interval is the series bucket width; 0 means 1s.
	Interval time.Duration
	// Timeout is how long after its intended send time a message may
	// reach a consumer; later, or never, it counts as a timeout. 0 means 10s.
	Timeout time.Duration
}

// Validate reports a spec the client cannot run.
func (s MessagingStreamSpec) Validate() error {
	switch {
	case !s.Target.IsValid():
		return errors.New("agent messaging-stream: no target")
	case !(s.Rate > 0) || math.IsInf(s.Rate, 0):
		return fmt.Errorf("agent messaging-stream: rate must be a finite number > 0, got %g", s.Rate)
	case s.Consumers < 0:
		return errors.New("agent messaging-stream: consumers must be ≥ 0")
	case s.BodySize < StreamHeaderSize:
		return fmt.Errorf("agent messaging-stream: body size must be ≥ %d (sequence and send time), got %d", StreamHeaderSize, s.BodySize)
	case s.Duration <= 0:
		return errors.New("agent messaging-stream: duration must be positive")
	case s.Warmup < 0 || s.Timeout < 0 || s.Interval < 0:
		return errors.New("agent messaging-stream: warmup, timeout and interval must be ≥ 0")
	}
	return nil
}

// streamConsumer is one consumer's tally. Messages from first (the
// first the producer sent in the measured window) on are the window's.
type streamConsumer struct {
	s     *MessagingStreamSpec
	ck    *clock
	first *atomic.Int64
	// inWindow counts the messages (any) that arrived in the measured
	// window, in time: the consumer's achieved rate.
	inWindow atomic.Uint64
	tally    *httpTally
	mu       sync.Mutex
	seen     []bool // by k - first
	got      int64  // the window's messages seen, in time or not
	done     bool
}

// onMessage records one delivery.
func (c *streamConsumer) onMessage(data []byte) {
	now := time.Now()
	if len(data) < StreamHeaderSize {
		c.tally.record(0, 0, false, fmt.Errorf("message of %d bytes, want %d", len(data), c.s.BodySize))
		return
	}
	k := int64(binary.LittleEndian.Uint64(data))
	lat := now.Sub(time.Unix(0, int64(binary.LittleEndian.Uint64(data[8:]))))
	if c.ck.phase.Load() == phaseMeasure && lat <= c.s.Timeout && len(data) == c.s.BodySize {
		c.inWindow.Add(1)
	}
	first := c.first.Load()
	if first < 0 || k < first {
		return // the warmup's
	}
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return // counted as a timeout already
	}
	i := k - first
	for int64(len(c.seen)) <= i {
		c.seen = append(c.seen, false)
	}
	dup := c.seen[i]
	c.seen[i] = true
	if !dup {
		c.got++
	}
	c.mu.Unlock()
	var err error
	switch {
	case dup:
		err = fmt.Errorf("message %d delivered twice", k)
	case len(data) != c.s.BodySize:
		err = fmt.Errorf("message of %d bytes, want %d", len(data), c.s.BodySize)
	case lat > c.s.Timeout:
		err = errReplyTimeout
	}
	c.tally.record(lat, 0, false, err)
}

// received is how many of the window's messages the consumer has seen.
func (c *streamConsumer) received() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got
}

// close stops recording and counts the window's messages it never saw
// (of sent) as timeouts.
func (c *streamConsumer) close(sent int64) {
	c.mu.Lock()
	c.done = true
	missing := sent - c.got
	c.mu.Unlock()
	for range max(missing, 0) {
		c.tally.record(0, 0, false, errReplyTimeout)
	}
}

// stderrLogger sends the stream client's log lines to stderr, so that
// stdout holds only the result.
type stderrLogger struct{ l *log.Logger }

func (s stderrLogger) Info(m string, v ...any)  { s.l.Printf("[info] "+m, v...) }
func (s stderrLogger) Error(m string, v ...any) { s.l.Printf("[error] "+m, v...) }
func (s stderrLogger) Debug(string, ...any)     {}
func (s stderrLogger) Warn(m string, v ...any)  { s.l.Printf("[warn] "+m, v...) }

// RunMessagingStream runs one stream producer and its consumers against
// a RabbitMQ stream port and returns the result: requests_per_s (messages
// per second that arrived at the consumers in the measured window, within
// the timeout of their send times, per consumer: the achieved rate, as a
// Kafka benchmark's consume rate; a path that queues what it cannot carry
// falls short of the offered rate even when the queue drains after the
// window), messages_per_s (message transfers through the broker:
// that times one publish plus one delivery per consumer), latency
// percentiles over every consumer's deliveries, errors, timeouts, late
// messages, send lag, target rate and sustained. It declares a stream of
// its own and deletes it when done.
func RunMessagingStream(ctx context.Context, s MessagingStreamSpec) (*Result, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s.Consumers = max(s.Consumers, 1)
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	logs.SetLogger(stderrLogger{log.New(os.Stderr, "", log.LstdFlags)})
	host, port := s.Target.Addr().String(), int(s.Target.Port())
	opts := stream.NewEnvironmentOptions().SetHost(host).SetPort(port).SetUser("guest").SetPassword("guest").
		// Every connection dials the target: the broker's advertised host
		// is its own address, which a datapath may not route to.
		SetAddressResolver(stream.AddressResolver{Host: host, Port: port}).
		SetMaxProducersPerClient(1).SetMaxConsumersPerClient(1).SetRPCTimeout(ioTimeout)
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		if env != nil {
			env.Close()
		}
		return nil, fmt.Errorf("agent messaging-stream: connect %s: %w", s.Target, err)
	}
	defer env.Close()
	name := fmt.Sprintf("spanperf.stream.%d.%d", os.Getpid(), time.Now().UnixNano())
	if err := env.DeclareStream(name, &stream.StreamOptions{}); err != nil {
		return nil, fmt.Errorf("agent messaging-stream: declare stream: %w", err)
	}
	defer env.DeleteStream(name)

	var first atomic.Int64
	first.Store(-1)
	var closeMu sync.Mutex
	var closeErr error
	cs := make([]*streamConsumer, s.Consumers)
	var consumers []*stream.Consumer
	defer func() {
		for _, c := range consumers {
			c.Close()
		}
	}()
	var ck clock
	for i := range cs {
		c := &streamConsumer{s: &s, ck: &ck, first: &first, tally: &httpTally{hist: newHist(), lag: newHist()}}
		cs[i] = c
		sc, err := env.NewConsumer(name, func(_ stream.ConsumerContext, m *streamamqp.Message) { c.onMessage(m.GetData()) },
			stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.Next()).
				SetClientProvidedName("spanperf-consumer-"+strconv.Itoa(i)))
		if err != nil {
			return nil, fmt.Errorf("agent messaging-stream: consumer %d: %w", i, err)
		}
		consumers = append(consumers, sc)
		closed := sc.NotifyClose()
		go func() {
			if ev, ok := <-closed; ok && ev.Err != nil {
				closeMu.Lock()
				if closeErr == nil {
					closeErr = fmt.Errorf("consumer %d closed: %w", i, ev.Err)
				}
				closeMu.Unlock()
			}
		}()
	}
	producer, err := env.NewProducer(name, stream.NewProducerOptions().SetClientProvidedName("spanperf-producer"))
	if err != nil {
		return nil, fmt.Errorf("agent messaging-stream: producer: %w", err)
	}
	defer producer.Close()
	ptally := &httpTally{hist: newHist(), lag: newHist()}
	confirms := producer.NotifyPublishConfirmation()
	confirmed := make(chan struct{})
	go func() {
		defer close(confirmed)
		for batch := range confirms {
			for _, st := range batch {
				if !st.IsConfirmed() {
					err := st.GetError()
					if err == nil {
						err = fmt.Errorf("publish %d not confirmed (code %d)", st.GetPublishingId(), st.GetErrorCode())
					}
					ptally.record(0, 0, false, fmt.Errorf("publish: %w", err))
				}
			}
		}
	}()

	release := reserveProcs(1)
	defer release()
	var sent atomic.Int64 // the window's messages sent
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runStreamProducer(&ck, &s, producer, &first, &sent, ptally, cs)
	}()
	delivered := func() (n uint64) {
		for _, c := range cs {
			n += c.inWindow.Load()
		}
		return n
	}
	var series []float64
	var prev uint64
	var cpu0, cpu1 float64
	prevT := time.Now()
	ran := ck.run(ClientSpec{Duration: s.Duration, Warmup: s.Warmup, Interval: s.Interval}, func(i int) {
		n, now := delivered(), time.Now()
		if i < 0 {
			cpu0 = cpuSeconds()
		} else {
			series = append(series, float64(n-prev)/float64(s.Consumers)/now.Sub(prevT).Seconds())
			cpu1 = cpuSeconds()
		}
		prev, prevT = n, now
	})
	wg.Wait()
	// Every consumer has every message, or the timeout has passed since
	// the last was due.
	n := sent.Load()
	for deadline := time.Now().Add(s.Timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		all := true
		for _, c := range cs {
			all = all && c.received() >= n
		}
		if all {
			break
		}
	}
	for _, c := range cs {
		c.close(n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := httpTotals{hist: newHist(), lag: newHist()}
	ptally.mu.Lock()
	t.add(ptally.hist, ptally.lag, ptally.errs, ptally.timeouts, ptally.late, ptally.firstErr)
	ptally.mu.Unlock()
	for _, c := range cs {
		c.tally.mu.Lock()
		t.add(c.tally.hist, c.tally.lag, c.tally.errs, c.tally.timeouts, c.tally.late, c.tally.firstErr)
		c.tally.mu.Unlock()
	}
	closeMu.Lock()
	if closeErr != nil {
		t.errs++
		if t.firstErr == nil {
			t.firstErr = closeErr
		}
	}
	closeMu.Unlock()
	elapsed := ck.window(ran)
	inTime := t.hist.TotalCount() - int64(t.late)
	var arrived uint64
	for _, c := range cs {
		arrived += c.inWindow.Load()
	}
	// Every message late is a measurement (not sustained, all timeouts);
	// none consumed at all, with errors, is a failure.
	if inTime <= 0 && t.timeouts == 0 {
		if t.firstErr != nil {
			return nil, fmt.Errorf("agent messaging-stream: no message consumed in %s: %w", s.Duration, t.firstErr)
		}
		return nil, fmt.Errorf("agent messaging-stream: no message consumed in %s", s.Duration)
	}
	m, missing := latencyMetrics(t.hist)
	if inTime <= 0 {
		if missing == nil {
			missing = map[string]string{}
		}
		for k := range m {
			if k != results.LatencySamples {
				delete(m, k)
				missing[k] = "no message reached a consumer within the timeout"
			}
		}
	}
	m[MetricRequestsPerS] = float64(arrived) / float64(s.Consumers) / elapsed.Seconds()
	m[MetricMessagesPerS] = m[MetricRequestsPerS] * float64(1+s.Consumers)
	m[MetricErrors] = float64(t.errs)
	m[MetricTimeouts] = float64(t.timeouts)
	m["messages"] = float64(n)
	m["cpu_seconds_client"] = cpu1 - cpu0
	m["duration_s"] = elapsed.Seconds()
	pacedMetrics(m, MetricRequestsPerS, s.Rate, t.lag)
	m[results.Late] = float64(t.late)
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

// runStreamProducer publishes message k at its due time t0 + k/Rate
// until ck stops, as msgWorker.run paces requests. The first message due
// in the window sets first; sent counts the window's messages sent. The
// messages due in the window but unsent when it ends are each consumer's
// late ones (recordLate), and the send lag is the producer's.
func runStreamProducer(ck *clock, s *MessagingStreamSpec, p *stream.Producer, first, sent *atomic.Int64, tally *httpTally, cs []*streamConsumer) {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	pc := newPacer()
	stopped := func() bool { return ck.phase.Load() == phaseStop }
	dueNs := func(k int64) int64 { return int64(float64(k) / s.Rate * 1e9) }
	t0 := ck.origin()
	for k := int64(0); ; k++ {
		due := t0.Add(time.Duration(dueNs(k)))
		waited := pc.wait(due, stopped)
		now := time.Now()
		ph := ck.phase.Load()
		if ph == phaseStop {
			if end, ok := ck.ended(); ok {
				for _, c := range cs {
					c.tally.mu.Lock()
					c.tally.late = recordLate(c.tally.hist, k, dueNs, int64(end.Sub(t0)))
					c.tally.mu.Unlock()
				}
			}
			return
		}
		// A message belongs to the window its due time falls in (see
		// msgWorker.run).
		measured := ph == phaseMeasure && !due.Before(ck.start)
		if measured && first.Load() < 0 {
			first.Store(k)
		}
		body := make([]byte, s.BodySize)
		binary.LittleEndian.PutUint64(body, uint64(k))
		binary.LittleEndian.PutUint64(body[8:], uint64(due.UnixNano()))
		if measured {
			sent.Add(1)
		}
		if err := p.Send(streamamqp.NewMessage(body)); err != nil {
			tally.record(0, 0, false, fmt.Errorf("publish: %w", err))
			return
		}
		if measured && waited {
			tally.mu.Lock()
			tally.lag.RecordValue(min(max(int64(now.Sub(due)), 1), tally.lag.HighestTrackableValue()))
			tally.mu.Unlock()
		}
	}
}

// messagingStreamMain runs the messaging-stream subcommand of Main.
func messagingStreamMain(args []string, stdout, stderr io.Writer) int {
	var s MessagingStreamSpec
	var target string
	fs := flag.NewFlagSet("agent messaging-stream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&target, "target", "", "broker stream port HOST:PORT (an address, or a name looked up once before the run)")
	fs.Float64Var(&s.Rate, "rate", 0, "offered messages/s, latency from the intended send time")
	fs.IntVar(&s.Consumers, "consumers", 1, "consumers, each reading the whole stream on its own connection")
	fs.IntVar(&s.BodySize, "body-size", StreamHeaderSize, "message body bytes (≥ 16)")
	fs.DurationVar(&s.Duration, "duration", 0, "measured time")
	fs.DurationVar(&s.Warmup, "warmup", 0, "time before measuring")
	fs.DurationVar(&s.Interval, "interval", 0, "series bucket width (default 1s)")
	fs.DurationVar(&s.Timeout, "timeout", 0, "how long after its send time a message may arrive (default 10s)")
	if fs.Parse(args) != nil {
		return 2
	}
	return clientMain("messaging-stream", target, stdout, stderr, func(addr netip.AddrPort) (*Result, error) {
		s.Target = addr
		return RunMessagingStream(context.Background(), s)
	})
}
