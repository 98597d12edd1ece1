package workload

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// PatternStream is the messaging workload's log-streaming pattern (the
// Kafka benchmark's shape): one producer appends to a RabbitMQ stream at
// rate, and consumers, each on its own, read all of it.
const PatternStream = "stream"

// consumersField is the messaging workload's consumers parameter.
// It has no default in the catalog, so that request-response trials do
// not carry it among their parameters (nor change their labels); unset
// means 1.
var consumersField = scenario.Field{Name: "consumers", Kind: scenario.KindInt, HasMin: true, Min: 1, List: true,
	Doc: "pattern stream: consumers (unset: 1), each on its own connection reading every message from where the trial starts (its own offset, as a Kafka consumer group of its own)"}

// checkStreamParams refuses what pattern stream cannot do, and consumers
// with another pattern. Defaults are applied, so a key at its default is
// not a choice (consumers has none: set at all, it is one).
func checkStreamParams(p results.Params) error {
	var errs []error
	if stringParam(p, "pattern", PatternRequestResponse) != PatternStream {
		if _, ok := p["consumers"]; ok {
			errs = append(errs, &scenario.FieldError{Key: "consumers", Msg: "applies to pattern stream only (request-response: connections)"})
		}
		return errors.Join(errs...)
	}
	if b := stringParam(p, "broker", BrokerRabbitMQ); b != BrokerRabbitMQ {
		errs = append(errs, &scenario.FieldError{Key: "pattern",
			Msg: fmt.Sprintf("stream needs broker rabbitmq (a RabbitMQ stream is the log), not %s", b)})
	}
	if _, ok := p["protocol"]; ok {
		errs = append(errs, &scenario.FieldError{Key: "protocol", Msg: "pattern stream speaks RabbitMQ's stream protocol: leave protocol unset"})
	}
	if intParam(p, "connections", 1) != 1 {
		errs = append(errs, &scenario.FieldError{Key: "connections", Msg: "pattern stream has one producer connection and one per consumer: set consumers"})
	}
	if intParam(p, "in_flight", 1) != 1 {
		errs = append(errs, &scenario.FieldError{Key: "in_flight", Msg: "pattern stream does not wait for replies: the producer sends at rate, unconfirmed messages unbounded"})
	}
	if d, _ := p["durable"].(bool); d {
		errs = append(errs, &scenario.FieldError{Key: "durable", Msg: "a stream is always written to the broker's disk: leave durable unset"})
	}
	if b, ok := p["body_size"]; ok && intParam(results.Params{"body_size": b}, "body_size", 0) < agent.StreamHeaderSize {
		errs = append(errs, &scenario.FieldError{Key: "body_size",
			Msg: fmt.Sprintf("pattern stream needs ≥ %d bytes (each message carries its sequence number and intended send time)", agent.StreamHeaderSize)})
	}
	return errors.Join(errs...)
}

// runStream runs pattern stream: the group's RabbitMQ with its stream
// plugin in env.Server (a request-response trial's broker, with AMQP on
// the port, is swapped for one; see groupBroker), its stream port on env.Port, and one agent in env.Client
// that produces and consumes through the datapath (one clock for the
// send and the receive times).
func (w Messaging) runStream(ctx context.Context, env Env) (*Result, error) {
	p := env.Params
	host := "127.0.0.1"
	if a, ok := env.Server.(interface{ Addr() netip.Addr }); ok && a.Addr().IsValid() {
		host = a.Addr().String()
	}
	b, done, err := groupBroker(ctx, env, BrokerSpec{Kind: BrokerRabbitMQ, Port: env.Port, MkdirTemp: env.MkdirTemp,
		Stream: true, AdvertisedHost: host})
	if err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}
	defer done()
	args := []string{"messaging-stream", "--target", env.Target.String(),
		"--rate", strconv.FormatFloat(floatParam(p, "rate", 100), 'g', -1, 64),
		"--consumers", strconv.FormatInt(intParam(p, "consumers", 1), 10),
		"--body-size", strconv.FormatInt(intParam(p, "body_size", 1024), 10),
		"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
	if w.StreamTimeout > 0 {
		args = append(args, "--timeout", w.StreamTimeout.String())
	}
	rss := sampleMaxRSS(b, env.Warmup, env.Duration)
	res, err := runAgentClient(ctx, env, b.Process(), "messaging", args, 30*time.Second)
	rssMax, rssOK := rss.stop()
	if err != nil {
		return nil, fmt.Errorf("%w (broker log: %s)", err, BrokerLogError(BrokerRabbitMQ, b.Log()))
	}
	name := "rabbitmq@" + env.Server.Name()
	m := res.Metrics
	m[MetricBrokerStartS] = b.StartTime.Seconds()
	if s, ok := m[results.CPUSecondsServer]; ok && env.Duration > 0 {
		m[results.For(results.CPUCores, name)] = s / env.Duration.Seconds()
	}
	if rssOK {
		m[results.For(results.RSSBytesMax, name)] = rssMax
	}
	return res, nil
}
