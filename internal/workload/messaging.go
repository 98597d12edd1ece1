package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Metrics only the messaging workload reports (besides those of every
// paced workload). The broker is a component of the server site, named
// as datapath components are, PROGRAM@SITE (rabbitmq@b, nats-server@b),
// and so is the responder (messaging-responder@b): their figures are
// apart from the datapath's.
const (
	// MetricMessagesPerS is twice the answered requests per second: each
	// request and its reply is one message transfer through the broker.
	MetricMessagesPerS = agent.MetricMessagesPerS
	// MetricBrokerStartS is how long the broker took to start, in
	// seconds: the group's broker, started by its first messaging trial,
	// so every trial of a group has the same figure.
	MetricBrokerStartS = "broker_start_s"
)

// Messaging patterns.
const (
	PatternRequestResponse = "request-response"
)

// brokerProtocols lists the protocols each broker speaks here; the first
// is the default.
var brokerProtocols = map[string][]string{
	BrokerRabbitMQ: {agent.ProtocolAMQP091, agent.ProtocolAMQP10},
	BrokerNATS:     {agent.ProtocolNATS},
}

// MessagingInfo registers the messaging workload: a real broker in the
// server site, a responder beside it, paced clients in the client site.
func MessagingInfo() Info {
	return Info{
		Name: "messaging",
		Summary: "request-response through a real broker (RabbitMQ over AMQP 0-9-1 or AMQP 1.0, or NATS) in the server site, paced: " +
			"requests/s (each two message transfers), latency from the intended send time, errors, timeouts; the broker's CPU and RSS apart; " +
			"pattern stream: a paced producer and consumers of a RabbitMQ stream (the Kafka benchmark's shape)",
		Params: []scenario.Field{
			{Name: "broker", Kind: scenario.KindString, Enum: []string{BrokerRabbitMQ, BrokerNATS}, Default: BrokerRabbitMQ,
				Doc: "rabbitmq (Debian's rabbitmq-server, its own node, epmd and directory, one per (repetition, datapath) group) or nats (Debian's nats-server)"},
			{Name: "protocol", Kind: scenario.KindString, Enum: []string{agent.ProtocolAMQP091, agent.ProtocolAMQP10, agent.ProtocolNATS},
				Doc: "amqp091 (rabbitmq; github.com/rabbitmq/amqp091-go), amqp10 (rabbitmq through its rabbitmq_amqp1_0 plugin, which every RabbitMQ the workload starts enables; github.com/Azure/go-amqp) or nats (nats; github.com/nats-io/nats.go); unset: the broker's own"},
			{Name: "pattern", Kind: scenario.KindString, Enum: []string{PatternRequestResponse, PatternStream}, Default: PatternRequestResponse,
				Doc: "request-response: each request goes to a queue (subject), a responder beside the broker publishes its body back to the client's reply queue (inbox); " +
					"stream (rabbitmq): a producer appends to a RabbitMQ stream at rate, consumers read it all, latency from each message's intended send time to each consumer"},
			{Name: "rate", Kind: scenario.KindFloat, HasMin: true, Min: 0, List: true, Default: 100.0,
				Doc: "offered requests/s across all connections, paced; latency from each request's intended send time to its reply"},
			{Name: "connections", Kind: scenario.KindInt, Default: int64(1), HasMin: true, Min: 1, List: true,
				Doc: "client connections to the broker, each with its own reply queue; the responder consumes on as many"},
			{Name: "in_flight", Kind: scenario.KindInt, Default: int64(1), HasMin: true, Min: 1, List: true,
				Doc: "unanswered requests per connection (a request due with these out waits, and its wait counts); amqp091: also the consumers' prefetch; amqp10: as many receiving links of credit one each (RabbitMQ 3.10's plugin overruns a larger credit)"},
			consumersField,
			sizeField("body_size", "request body bytes (the reply echoes it); stream: message body bytes, ≥ 16", 1024),
			{Name: "durable", Kind: scenario.KindBool, Default: false,
				Doc: "amqp091 and amqp10: durable request queue and persistent messages (written to the broker's disk; amqp10: the durable header, sent pre-settled as amqp091's without confirms; its request queue is durable either way, as the plugin makes a shared queue)"},
		},
		New:         func() Workload { return Messaging{} },
		CheckParams: checkMessagingParams,
	}
}

// checkMessagingParams refuses a protocol the broker does not speak, a
// durable NATS run and a rate of 0.
func checkMessagingParams(p results.Params) error {
	broker := stringParam(p, "broker", BrokerRabbitMQ)
	var errs []error
	if proto, ok := p["protocol"].(string); ok && !slices.Contains(brokerProtocols[broker], proto) {
		errs = append(errs, &scenario.FieldError{Key: "protocol",
			Msg: fmt.Sprintf("broker %s does not speak %s (it speaks %v)", broker, proto, brokerProtocols[broker])})
	}
	if d, _ := p["durable"].(bool); d && broker == BrokerNATS {
		errs = append(errs, &scenario.FieldError{Key: "durable", Msg: "core NATS keeps no messages: durable needs broker rabbitmq"})
	}
	if r, ok := p["rate"]; ok && floatParam(results.Params{"rate": r}, "rate", 0) <= 0 {
		errs = append(errs, &scenario.FieldError{Key: "rate", Msg: "must be > 0: messaging is paced"})
	}
	return errors.Join(append(errs, checkStreamParams(p))...)
}

// Messaging is the messaging workload. Its zero value is what `type:
// messaging` runs.
type Messaging struct {
	// ResponderDelay holds every reply this long before the responder
	// publishes it: a responder of known latency, for known-answer tests.
	// It is not a scenario parameter.
	ResponderDelay time.Duration
	// StreamTimeout, when > 0, is how long after its intended send time
	// a stream message may reach a consumer before it is a timeout (the
	// agent's default is 10 s): for tests. Not a scenario parameter.
	StreamTimeout time.Duration
}

var (
	_ Workload     = Messaging{}
	_ Checker      = Messaging{}
	_ StartLimiter = Messaging{}
)

// StartLimiter is implemented by workloads whose Run starts something
// slow before its measured window (a broker that boots for seconds): the
// runner allows a trial StartLimit(env) more than its warmup and
// duration (and its own slack), and probes it as any other.
type StartLimiter interface {
	// StartLimit is the longest the start-up before the window may take.
	StartLimit(env Env) time.Duration
}

// StartLimit implements StartLimiter: the broker's start limit.
func (Messaging) StartLimit(env Env) time.Duration {
	if stringParam(env.Params, "broker", BrokerRabbitMQ) == BrokerNATS {
		return natsStartLimit
	}
	return rabbitmqStartLimit
}

// Check says whether both brokers are installed (either may be asked for).
func (Messaging) Check(context.Context) error {
	return errors.Join(CheckBroker(BrokerRabbitMQ), CheckBroker(BrokerNATS))
}

// Run implements Workload: it gets the group's broker in env.Server on
// env.Port (started by the group's first messaging trial, its directory
// from env.MkdirTemp; without env.Shared, the trial's own), starts the
// responder beside it, then the client in env.Client through the
// datapath, and stops what it started.
func (w Messaging) Run(ctx context.Context, env Env) (*Result, error) {
	p := env.Params
	if err := checkMessagingParams(p); err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}
	if _, ok := env.Server.(testbed.PodSite); ok {
		return nil, errors.New("messaging: runs on local sites only")
	}
	kind := stringParam(p, "broker", BrokerRabbitMQ)
	proto := stringParam(p, "protocol", brokerProtocols[kind][0])
	switch pat := stringParam(p, "pattern", PatternRequestResponse); pat {
	case PatternStream:
		return w.runStream(ctx, env)
	case PatternRequestResponse:
	default:
		return nil, fmt.Errorf("messaging: pattern %q not supported", pat)
	}
	conns := strconv.FormatInt(intParam(p, "connections", 1), 10)
	inFlight := strconv.FormatInt(intParam(p, "in_flight", 1), 10)
	durable, _ := p["durable"].(bool)

	b, done, err := groupBroker(ctx, env, BrokerSpec{Kind: kind, Port: env.Port, Plugins: brokerPlugins(kind), MkdirTemp: env.MkdirTemp})
	if err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}
	defer done()
	respArgs := []string{"messaging-respond", "--protocol", proto, "--target", "127.0.0.1:" + strconv.Itoa(env.Port),
		"--consumers", conns, "--in-flight", inFlight}
	if durable {
		respArgs = append(respArgs, "--durable")
	}
	if w.ResponderDelay > 0 {
		respArgs = append(respArgs, "--delay", w.ResponderDelay.String())
	}
	resp, err := startAgent(ctx, env.Server, "agent-messaging-responder", respArgs...)
	if err != nil {
		return nil, fmt.Errorf("messaging: responder: %w: broker log: %s", err, BrokerLogError(kind, b.Log()))
	}
	defer resp.Stop(time.Second)

	cliArgs := []string{"messaging", "--protocol", proto, "--target", env.Target.String(),
		"--rate", strconv.FormatFloat(floatParam(p, "rate", 100), 'g', -1, 64), "--connections", conns, "--in-flight", inFlight,
		"--body-size", strconv.FormatInt(intParam(p, "body_size", 1024), 10),
		"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
	if durable {
		cliArgs = append(cliArgs, "--durable")
	}
	respCPU := watchCPU(resp, env.Warmup, env.Duration)
	defer respCPU.stop()
	rss := sampleMaxRSS(b, env.Warmup, env.Duration)
	// cpu_seconds_server is the broker's process tree, as pgbench's is
	// postgres's.
	res, err := runAgentClient(ctx, env, b.Process(), "messaging", cliArgs, 30*time.Second)
	rssMax, rssOK := rss.stop()
	if err != nil {
		return nil, fmt.Errorf("%w (broker log: %s)", err, BrokerLogError(kind, b.Log()))
	}
	site := env.Server.Name()
	brokerName := map[string]string{BrokerRabbitMQ: "rabbitmq", BrokerNATS: "nats-server"}[kind] + "@" + site
	m := res.Metrics
	m[MetricBrokerStartS] = b.StartTime.Seconds()
	if s, ok := m[results.CPUSecondsServer]; ok && env.Duration > 0 {
		m[results.For(results.CPUCores, brokerName)] = s / env.Duration.Seconds()
	}
	if rssOK {
		m[results.For(results.RSSBytesMax, brokerName)] = rssMax
	}
	if s, ok := respCPU.seconds(); ok && env.Duration > 0 {
		m[results.For(results.CPUCores, "messaging-responder@"+site)] = s / env.Duration.Seconds()
	}
	return res, nil
}

// groupBroker returns the broker spec names in env.Server: the one the
// group's trials share (env.Shared), started by the first that asks, or
// without env.Shared one of the trial's own. The port holds one broker:
// a trial that wants another (RabbitMQ after NATS) stops the kept one
// first. done ends the trial's use: it stops a broker of the trial's
// own, and drops a shared one that died during the trial so the next
// trial starts another. A shared broker found dead is an error quoting
// its log, and is dropped.
func groupBroker(ctx context.Context, env Env, spec BrokerSpec) (b *Broker, done func(), err error) {
	key := fmt.Sprintf("broker@%s:%d", env.Server.Name(), spec.Port)
	start := func() (io.Closer, error) { return StartBroker(ctx, env.Server, spec) }
	v, owned, err := env.Shared.Get(key, start)
	if err == nil && !owned && !v.(*Broker).spec.sameBroker(spec) {
		if err = env.Shared.Drop(key); err == nil {
			v, owned, err = env.Shared.Get(key, start)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	b = v.(*Broker)
	if owned {
		return b, func() { b.Close() }, nil
	}
	dead := func() bool {
		select {
		case <-b.Process().Done():
			return true
		default:
			return false
		}
	}
	if dead() {
		env.Shared.Drop(key)
		return nil, nil, fmt.Errorf("the group's %s broker in %s exited after an earlier trial: %v: %s",
			spec.Kind, env.Server.Name(), b.Process().Wait(), BrokerLogError(spec.Kind, b.Log()))
	}
	return b, func() {
		if dead() {
			env.Shared.Drop(key)
		}
	}, nil
}

// brokerPlugins are the plugins a broker of kind starts with: for
// RabbitMQ those of every protocol (rabbitmqPlugins), for NATS none.
func brokerPlugins(kind string) []string {
	if kind == BrokerRabbitMQ {
		return rabbitmqPlugins()
	}
	return nil
}

// maxRSS samples a broker's RSS every 200 ms over a trial's window.
type maxRSS struct {
	mu   sync.Mutex
	max  float64
	ok   bool
	done chan struct{}
	wg   sync.WaitGroup
}

func sampleMaxRSS(b *Broker, warmup, duration time.Duration) *maxRSS {
	r := &maxRSS{done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		start := time.NewTimer(warmup)
		defer start.Stop()
		select {
		case <-start.C:
		case <-r.done:
			return
		}
		end := time.Now().Add(duration)
		for {
			if v, err := b.RSSBytes(); err == nil {
				r.mu.Lock()
				r.max, r.ok = max(r.max, v), true
				r.mu.Unlock()
			}
			if time.Now().After(end) {
				return
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.done:
				return
			}
		}
	}()
	return r
}

// stop ends the sampling and returns the largest RSS seen.
func (r *maxRSS) stop() (float64, bool) {
	close(r.done)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.max, r.ok
}
