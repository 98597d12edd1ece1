package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// Messaging protocols.
const (
	ProtocolAMQP091 = "amqp091"
	ProtocolNATS    = "nats"
)

// RequestQueue is the queue (AMQP) or subject (NATS) requests are sent
// to; the responder consumes it.
const RequestQueue = "spanperf.requests"

// natsQueueGroup shares the requests among the responder's connections.
const natsQueueGroup = "spanperf-responders"

// MetricMessagesPerS is the message transfers per second of a messaging
// request-response run: two per answered request (the request and its
// reply each cross the broker once).
const MetricMessagesPerS = "messages_per_s"

// MessagingClientSpec says what one `spanperf agent messaging` run does:
// request-response through a broker, paced.
type MessagingClientSpec struct {
	// Protocol is ProtocolAMQP091 or ProtocolNATS.
	Protocol string
	// Target is the broker's address as reachable from the client's site.
	Target netip.AddrPort
	// Rate is the offered requests per second across all connections:
	// request k of connection i is due at t0 + (i + k·Connections)/Rate,
	// and its latency runs from that due time to its reply's arrival
	// (as the http client's, wrk2's correction for coordinated omission).
	Rate float64
	// Connections is the number of broker connections, each with its own
	// reply queue (AMQP) or inbox (NATS).
	Connections int
	// InFlight is how many requests a connection may have unanswered;
	// a request due while InFlight are out waits (late) for a reply. On
	// AMQP it is also the reply consumer's prefetch. 0 means 1.
	InFlight int
	// BodySize is the request body's size; the reply echoes it, and a
	// reply of another size is an error.
	BodySize int
	// Durable makes the request queue durable and the messages persistent
	// (AMQP only).
	Durable bool
	// Duration is the measured time, after Warmup.
	Duration, Warmup time.Duration
	// Interval is the series bucket width; 0 means 1s.
	Interval time.Duration
	// Timeout is how long a request waits for its reply before it counts
	// as a timeout; 0 means 10s.
	Timeout time.Duration
}

// Validate reports a spec the client cannot run.
func (s MessagingClientSpec) Validate() error {
	switch {
	case s.Protocol != ProtocolAMQP091 && s.Protocol != ProtocolAMQP10 && s.Protocol != ProtocolNATS:
		return fmt.Errorf("agent messaging: protocol must be %s, %s or %s, not %q", ProtocolAMQP091, ProtocolAMQP10, ProtocolNATS, s.Protocol)
	case !s.Target.IsValid():
		return errors.New("agent messaging: no target")
	case !(s.Rate > 0) || math.IsInf(s.Rate, 0):
		return fmt.Errorf("agent messaging: rate must be a finite number > 0, got %g", s.Rate)
	case s.Connections < 1:
		return errors.New("agent messaging: connections must be ≥ 1")
	case s.Duration <= 0:
		return errors.New("agent messaging: duration must be positive")
	case s.InFlight < 0 || s.BodySize < 0 || s.Warmup < 0 || s.Timeout < 0 || s.Interval < 0:
		return errors.New("agent messaging: in-flight, body size, warmup, timeout and interval must be ≥ 0")
	case s.Durable && s.Protocol == ProtocolNATS:
		return errors.New("agent messaging: durable needs amqp091 or amqp10 (core NATS keeps no messages)")
	}
	return nil
}

// msgConn is one client connection to a broker: Send publishes request id
// with body, asking for the reply on the connection's own destination;
// replies arrive at the onReply given to its constructor, from one
// goroutine, with the reply's id and body size. Close ends the connection
// and its reply delivery.
type msgConn interface {
	Send(id uint64, body []byte) error
	Close()
}

// dialMsg connects one client connection.
func dialMsg(s MessagingClientSpec, onReply func(id uint64, size int)) (msgConn, error) {
	if s.Protocol == ProtocolNATS {
		return dialNATSClient(s.Target.String(), onReply)
	}
	if s.Protocol == ProtocolAMQP10 {
		return dialAMQP10Client(s.Target.String(), s.InFlight, s.Durable, onReply)
	}
	return dialAMQPClient(s.Target.String(), s.InFlight, s.Durable, onReply)
}

func amqpURL(target string) string { return "amqp://guest:guest@" + target + "/" }

func amqpDial(target string) (*amqp.Connection, error) {
	return amqp.DialConfig(amqpURL(target), amqp.Config{Dial: amqp.DefaultDial(ioTimeout), Heartbeat: 10 * time.Second})
}

// declareRequests declares the request queue (both ends do, so either
// may start first).
func declareRequests(ch *amqp.Channel, durable bool) error {
	_, err := ch.QueueDeclare(RequestQueue, durable, !durable, false, false, nil)
	return err
}

// deleteRequestQueue deletes the request queue through AMQP 0-9-1, best
// effort: a responder's last act, so that the next trial on the broker
// starts with none.
func deleteRequestQueue(target string) {
	conn, err := amqpDial(target)
	if err != nil {
		return
	}
	defer conn.Close()
	if ch, err := conn.Channel(); err == nil {
		ch.QueueDelete(RequestQueue, false, false, false)
	}
}

type amqpClient struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	replyTo string
	mode    uint8
	done    chan struct{}
}

func dialAMQPClient(target string, inFlight int, durable bool, onReply func(uint64, int)) (_ *amqpClient, err error) {
	c := &amqpClient{done: make(chan struct{}), mode: amqp.Transient}
	if durable {
		c.mode = amqp.Persistent
	}
	if c.conn, err = amqpDial(target); err != nil {
		return nil, fmt.Errorf("amqp dial %s: %w", target, err)
	}
	defer func() {
		if err != nil {
			c.conn.Close()
		}
	}()
	if c.ch, err = c.conn.Channel(); err != nil {
		return nil, err
	}
	if err := declareRequests(c.ch, durable); err != nil {
		return nil, fmt.Errorf("declare %s: %w", RequestQueue, err)
	}
	q, err := c.ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return nil, fmt.Errorf("declare reply queue: %w", err)
	}
	c.replyTo = q.Name
	if err := c.ch.Qos(max(inFlight, 1), 0, false); err != nil {
		return nil, err
	}
	ds, err := c.ch.Consume(q.Name, "", false, true, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consume replies: %w", err)
	}
	go func() {
		defer close(c.done)
		for d := range ds {
			id, _ := strconv.ParseUint(d.CorrelationId, 10, 64)
			d.Ack(false)
			onReply(id, len(d.Body))
		}
	}()
	return c, nil
}

func (c *amqpClient) Send(id uint64, body []byte) error {
	return c.ch.Publish("", RequestQueue, false, false, amqp.Publishing{
		CorrelationId: strconv.FormatUint(id, 10), ReplyTo: c.replyTo, DeliveryMode: c.mode, Body: body})
}

func (c *amqpClient) Close() {
	c.conn.Close()
	<-c.done
}

type natsClient struct {
	nc    *nats.Conn
	inbox string
}

func natsConnect(target string) (*nats.Conn, error) {
	nc, err := nats.Connect("nats://"+target, nats.Timeout(ioTimeout), nats.NoReconnect(), nats.Name("spanperf"))
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", target, err)
	}
	return nc, nil
}

func dialNATSClient(target string, onReply func(uint64, int)) (*natsClient, error) {
	nc, err := natsConnect(target)
	if err != nil {
		return nil, err
	}
	c := &natsClient{nc: nc, inbox: nats.NewInbox()}
	// One subscription for every reply, each on a subject of its own
	// (INBOX.ID), as nats.go's own request multiplexer does.
	if _, err := nc.Subscribe(c.inbox+".*", func(m *nats.Msg) {
		id, _ := strconv.ParseUint(m.Subject[len(c.inbox)+1:], 10, 64)
		onReply(id, len(m.Data))
	}); err != nil {
		nc.Close()
		return nil, err
	}
	// The subscription is in place on the server before any request.
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *natsClient) Send(id uint64, body []byte) error {
	return c.nc.PublishRequest(RequestQueue, c.inbox+"."+strconv.FormatUint(id, 10), body)
}

func (c *natsClient) Close() { c.nc.Close() }

// errReplyTimeout is a request whose reply did not come within the
// timeout.
var errReplyTimeout = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "no reply within the timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

// msgPending is a request awaiting its reply.
type msgPending struct {
	due     time.Time
	measure bool
}

// msgWorker is one paced connection: it sends, and its reply callback
// records.
type msgWorker struct {
	s       MessagingClientSpec
	index   int
	conn    msgConn
	tally   *httpTally
	slots   chan struct{}
	mu      sync.Mutex
	pending map[uint64]msgPending
}

func (w *msgWorker) onReply(id uint64, size int) {
	w.mu.Lock()
	p, ok := w.pending[id]
	delete(w.pending, id)
	w.mu.Unlock()
	if !ok {
		return // timed out already
	}
	<-w.slots
	if !p.measure {
		return
	}
	var err error
	if size != w.s.BodySize {
		err = fmt.Errorf("reply of %d bytes, want %d", size, w.s.BodySize)
	}
	w.tally.record(time.Since(p.due), 0, false, err)
}

// expire counts the requests older than the timeout as timeouts and frees
// their slots.
func (w *msgWorker) expire(now time.Time) {
	w.mu.Lock()
	var n int
	for id, p := range w.pending {
		if now.Sub(p.due) >= w.s.Timeout {
			delete(w.pending, id)
			n++
			if p.measure {
				w.tally.record(0, 0, false, errReplyTimeout)
			}
		}
	}
	w.mu.Unlock()
	for range n {
		<-w.slots
	}
}

func (w *msgWorker) dueNs(k int64) int64 {
	return int64(float64(int64(w.index)+k*int64(w.s.Connections)) / w.s.Rate * 1e9)
}

// run sends until ck stops, as netHTTPEngine's paced connections do.
func (w *msgWorker) run(ck *clock, body []byte) {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	p := newPacer()
	stopped := func() bool { return ck.phase.Load() == phaseStop }
	t0 := ck.origin()
	for k := int64(0); ; k++ {
		due := t0.Add(time.Duration(w.dueNs(k)))
		waited := p.wait(due, stopped)
		// A free slot: a reply, a timeout, or the end.
		for got := false; !got; {
			select {
			case w.slots <- struct{}{}:
				got = true
			case <-time.After(50 * time.Millisecond):
				w.expire(time.Now())
			}
			if !got && stopped() {
				break
			}
		}
		sent := time.Now()
		ph := ck.phase.Load()
		if ph == phaseStop {
			if end, ok := ck.ended(); ok {
				w.tally.mu.Lock()
				w.tally.late = recordLate(w.tally.hist, k, w.dueNs, int64(end.Sub(t0)))
				w.tally.mu.Unlock()
			}
			return
		}
		// A request belongs to the window its due time falls in: one due
		// in the warmup but sent late, in the window, is not the window's
		// (else a stall in the warmup would inflate the window's rate).
		// ck.start is written before the phase turns to phaseMeasure.
		measured := ph == phaseMeasure && !due.Before(ck.start)
		w.mu.Lock()
		w.pending[uint64(k)] = msgPending{due: due, measure: measured}
		w.mu.Unlock()
		if err := w.conn.Send(uint64(k), body); err != nil {
			w.mu.Lock()
			delete(w.pending, uint64(k))
			w.mu.Unlock()
			<-w.slots
			w.tally.record(0, 0, false, err)
			return
		}
		if measured && waited {
			w.tally.mu.Lock()
			w.tally.lag.RecordValue(min(max(int64(sent.Sub(due)), 1), w.tally.lag.HighestTrackableValue()))
			w.tally.mu.Unlock()
		}
	}
}

// drain waits until every request sent has its reply or has timed out.
func (w *msgWorker) drain() {
	for {
		w.mu.Lock()
		n := len(w.pending)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
		w.expire(time.Now())
	}
}

// RunMessagingClient runs one messaging request-response client against a
// broker whose responder is already consuming, and returns its result:
// requests_per_s (answered requests), messages_per_s (twice that), the
// latency percentiles from each request's due time, errors, timeouts,
// late requests, send lag, target rate and sustained.
func RunMessagingClient(ctx context.Context, s MessagingClientSpec) (*Result, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s.InFlight = max(s.InFlight, 1)
	if s.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	body := make([]byte, s.BodySize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var ws []*msgWorker
	defer func() {
		for _, w := range ws {
			w.conn.Close()
		}
	}()
	for i := range s.Connections {
		w := &msgWorker{s: s, index: i, tally: &httpTally{hist: newHist(), lag: newHist()},
			slots: make(chan struct{}, s.InFlight), pending: map[uint64]msgPending{}}
		c, err := dialMsg(s, w.onReply)
		if err != nil {
			return nil, fmt.Errorf("agent messaging: connection %d: %w", i, err)
		}
		w.conn = c
		ws = append(ws, w)
	}
	release := reserveProcs(s.Connections)
	defer release()
	var ck clock
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(&ck, body)
		}()
	}
	completed := func() (n uint64) {
		for _, w := range ws {
			n += w.tally.ok.Load()
		}
		return n
	}
	var series []float64
	var prev uint64
	var cpu0, cpu1 float64
	prevT := time.Now()
	ran := ck.run(ClientSpec{Duration: s.Duration, Warmup: s.Warmup, Interval: s.Interval}, func(i int) {
		n, now := completed(), time.Now()
		if i < 0 {
			cpu0 = cpuSeconds()
		} else {
			series = append(series, float64(n-prev)/now.Sub(prevT).Seconds())
			cpu1 = cpuSeconds()
		}
		prev, prevT = n, now
	})
	wg.Wait()
	for _, w := range ws {
		w.drain()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := httpTotals{hist: newHist(), lag: newHist()}
	for _, w := range ws {
		w.tally.mu.Lock()
		t.add(w.tally.hist, w.tally.lag, w.tally.errs, w.tally.timeouts, w.tally.late, w.tally.firstErr)
		w.tally.mu.Unlock()
	}
	elapsed := ck.window(ran)
	answered := t.hist.TotalCount() - int64(t.late)
	if answered <= 0 {
		if t.firstErr != nil {
			return nil, fmt.Errorf("agent messaging: no request answered in %s: %w", s.Duration, t.firstErr)
		}
		return nil, fmt.Errorf("agent messaging: no request answered in %s", s.Duration)
	}
	m, missing := latencyMetrics(t.hist)
	m[MetricRequestsPerS] = float64(answered) / elapsed.Seconds()
	m[MetricMessagesPerS] = 2 * m[MetricRequestsPerS]
	m[MetricErrors] = float64(t.errs)
	m[MetricTimeouts] = float64(t.timeouts)
	m["requests"] = float64(answered)
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

// MessagingResponderSpec says what `spanperf agent messaging-respond`
// does: consume the requests from a broker and publish each body back to
// its reply destination.
type MessagingResponderSpec struct {
	// Protocol is ProtocolAMQP091 or ProtocolNATS.
	Protocol string
	// Target is the broker's address (in the broker's site).
	Target string
	// Consumers is the number of broker connections consuming requests,
	// each answering its requests one at a time; 0 means 1.
	Consumers int
	// InFlight is each AMQP consumer's prefetch; 0 means 1.
	InFlight int
	// Durable: as MessagingClientSpec's.
	Durable bool
	// Delay holds each reply this long before it is published: a
	// responder of known latency, for known-answer tests.
	Delay time.Duration
}

// ServeMessagingResponder connects the responder's consumers, writes a
// ready line to stdout, and answers until ctx ends or a connection fails.
func ServeMessagingResponder(ctx context.Context, s MessagingResponderSpec, stdout io.Writer) error {
	s.Consumers, s.InFlight = max(s.Consumers, 1), max(s.InFlight, 1)
	errc := make(chan error, s.Consumers)
	var closers []func()
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	for range s.Consumers {
		switch s.Protocol {
		case ProtocolNATS:
			nc, err := natsConnect(s.Target)
			if err != nil {
				return err
			}
			closers = append(closers, nc.Close)
			if _, err := nc.QueueSubscribe(RequestQueue, natsQueueGroup, func(m *nats.Msg) {
				holdFor(s.Delay)
				if err := m.Respond(m.Data); err != nil {
					errc <- err
				}
			}); err != nil {
				return err
			}
			if err := nc.Flush(); err != nil {
				return err
			}
		case ProtocolAMQP091:
			conn, err := amqpDial(s.Target)
			if err != nil {
				return fmt.Errorf("amqp dial %s: %w", s.Target, err)
			}
			closers = append(closers, func() { conn.Close() })
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			if err := declareRequests(ch, s.Durable); err != nil {
				return err
			}
			// A group's trials share the broker: a durable queue left
			// behind would clash with the next trial's declaration (and
			// hand it stale requests), so the responder removes it.
			closers = append(closers, func() { ch.QueueDelete(RequestQueue, false, false, false) })
			if err := ch.Qos(s.InFlight, 0, false); err != nil {
				return err
			}
			ds, err := ch.Consume(RequestQueue, "", false, false, false, false, nil)
			if err != nil {
				return err
			}
			mode := amqp.Transient
			if s.Durable {
				mode = amqp.Persistent
			}
			go func() {
				for d := range ds {
					holdFor(s.Delay)
					err := ch.Publish("", d.ReplyTo, false, false, amqp.Publishing{CorrelationId: d.CorrelationId, DeliveryMode: mode, Body: d.Body})
					if err == nil {
						err = d.Ack(false)
					}
					if err != nil {
						errc <- err
						return
					}
				}
				errc <- errors.New("delivery channel closed")
			}()
		case ProtocolAMQP10:
			if len(closers) == 0 {
				// Run last: the group's later trials share the broker, and
				// the durable request queue would hand them stale requests
				// (and clash with amqp091's non-durable one). AMQP 1.0
				// cannot delete a queue; 0-9-1 on the same port can.
				closers = append(closers, func() { deleteRequestQueue(s.Target) })
			}
			c, err := serveAMQP10Consumer(ctx, s, errc)
			if err != nil {
				return err
			}
			closers = append(closers, c)
		default:
			return fmt.Errorf("agent messaging-respond: protocol must be %s, %s or %s, not %q", ProtocolAMQP091, ProtocolAMQP10, ProtocolNATS, s.Protocol)
		}
	}
	if err := json.NewEncoder(stdout).Encode(Ready{Ready: true, Addr: s.Target}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("agent messaging-respond: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// messagingMain runs the messaging and messaging-respond subcommands of Main.
func messagingMain(args []string, stdout, stderr io.Writer) int {
	if args[0] == "messaging-respond" {
		var s MessagingResponderSpec
		fs := flag.NewFlagSet("agent messaging-respond", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&s.Protocol, "protocol", "", "amqp091, amqp10 or nats")
		fs.StringVar(&s.Target, "target", "", "broker HOST:PORT")
		fs.IntVar(&s.Consumers, "consumers", 1, "broker connections consuming requests")
		fs.IntVar(&s.InFlight, "in-flight", 1, "prefetch of each AMQP consumer (amqp10: links of credit one)")
		fs.BoolVar(&s.Durable, "durable", false, "durable request queue, persistent replies (amqp091, amqp10)")
		fs.DurationVar(&s.Delay, "delay", 0, "hold every reply this long")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := ServeMessagingResponder(ctx, s, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	var s MessagingClientSpec
	var target string
	fs := flag.NewFlagSet("agent messaging", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.Protocol, "protocol", "", "amqp091, amqp10 or nats")
	fs.StringVar(&target, "target", "", "broker HOST:PORT (an address, or a name looked up once before the run)")
	fs.Float64Var(&s.Rate, "rate", 0, "offered requests/s across all connections, latency from the intended send time")
	fs.IntVar(&s.Connections, "connections", 1, "broker connections")
	fs.IntVar(&s.InFlight, "in-flight", 1, "unanswered requests per connection (AMQP: the reply consumer's prefetch)")
	fs.IntVar(&s.BodySize, "body-size", 0, "request (and reply) body bytes")
	fs.BoolVar(&s.Durable, "durable", false, "durable request queue, persistent messages (amqp091, amqp10)")
	fs.DurationVar(&s.Duration, "duration", 0, "measured time")
	fs.DurationVar(&s.Warmup, "warmup", 0, "time before measuring")
	fs.DurationVar(&s.Interval, "interval", 0, "series bucket width (default 1s)")
	fs.DurationVar(&s.Timeout, "timeout", 0, "how long a request waits for its reply (default 10s)")
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	return clientMain("messaging", target, stdout, stderr, func(addr netip.AddrPort) (*Result, error) {
		s.Target = addr
		return RunMessagingClient(context.Background(), s)
	})
}
