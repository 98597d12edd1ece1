package plugins

import (
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestMessagingParamsChecked: a messaging workload whose keys exclude each
// other (a protocol its broker does not speak, durable on NATS, rate 0,
// pattern stream on NATS or with in_flight or a body too small for its
// header, consumers without pattern stream) is refused at parse time by file, line and key; one that fits parses.
func TestMessagingParamsChecked(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: rabbitmq\n    protocol: nats\n    rate: 100\n",
			"s.yaml:6: workloads[0].protocol: broker rabbitmq does not speak nats (it speaks [amqp091 amqp10])"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: nats\n    protocol: amqp10\n    rate: 100\n",
			"s.yaml:6: workloads[0].protocol: broker nats does not speak amqp10 (it speaks [nats])"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: nats\n    rate: [100, 200]\n    durable: true\n",
			"s.yaml:7: workloads[0].durable: core NATS keeps no messages: durable needs broker rabbitmq"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    rate: [100, 0]\n",
			"s.yaml:5: workloads[0].rate: must be > 0: messaging is paced"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: nats\n    protocol: nats\n    rate: 100\n", ""},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: rabbitmq\n    protocol: amqp10\n    durable: true\n    rate: 100\n", ""},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: nats\n    pattern: stream\n    rate: 100\n",
			"s.yaml:6: workloads[0].pattern: stream needs broker rabbitmq (a RabbitMQ stream is the log), not nats"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    pattern: stream\n    in_flight: 4\n",
			"s.yaml:6: workloads[0].in_flight: pattern stream does not wait for replies: the producer sends at rate, unconfirmed messages unbounded"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    pattern: stream\n    body_size: 8\n",
			"s.yaml:6: workloads[0].body_size: pattern stream needs ≥ 16 bytes (each message carries its sequence number and intended send time)"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    consumers: 2\n",
			"s.yaml:5: workloads[0].consumers: applies to pattern stream only (request-response: connections)"},
		{"name: s\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    pattern: stream\n    consumers: [1, 4]\n    rate: 1000\n", ""},
	} {
		_, err := scenario.Parse("s.yaml", []byte(c.src), Catalog{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.src, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%q:\n got %v\nwant %s", c.src, err, c.want)
		}
	}
}
