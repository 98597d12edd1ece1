package workload

import (
	"errors"
	"io"
	"slices"
	"testing"
)

type closeLog struct {
	name string
	log  *[]string
}

func (c closeLog) Close() error { *c.log = append(*c.log, c.name); return nil }

// TestShared: Get starts once per key and keeps it; a failed start keeps
// nothing; Drop closes and forgets; Close closes the last started first;
// a nil Shared starts every time and hands ownership to the caller.
func TestShared(t *testing.T) {
	var closed []string
	starts := 0
	start := func(name string) func() (io.Closer, error) {
		return func() (io.Closer, error) { starts++; return closeLog{name, &closed}, nil }
	}
	s := NewShared()
	for range 3 {
		if _, owned, err := s.Get("a", start("a")); err != nil || owned {
			t.Fatalf("Get a: owned %v, %v", owned, err)
		}
	}
	if starts != 1 {
		t.Errorf("a started %d times, want 1", starts)
	}
	boom := errors.New("boom")
	if _, _, err := s.Get("b", func() (io.Closer, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("failed start: %v", err)
	}
	s.Get("b", start("b"))
	s.Get("c", start("c"))
	if err := s.Drop("c"); err != nil || !slices.Equal(closed, []string{"c"}) {
		t.Errorf("Drop c: %v, closed %v", err, closed)
	}
	s.Get("c", start("c2"))
	if starts != 4 {
		t.Errorf("%d starts, want 4 (a, b, c, c again)", starts)
	}
	if err := s.Close(); err != nil || !slices.Equal(closed, []string{"c", "c2", "b", "a"}) {
		t.Errorf("Close: %v, closed %v, want c then c2, b, a", err, closed)
	}
	if _, _, err := s.Get("a", start("a")); err == nil {
		t.Error("Get after Close succeeded")
	}
	var none *Shared
	for range 2 {
		if _, owned, err := none.Get("a", start("n")); err != nil || !owned {
			t.Errorf("nil Shared: owned %v, %v", owned, err)
		}
	}
	if starts != 6 {
		t.Errorf("%d starts, want 6 (nil Shared starts each time)", starts)
	}
}

// TestSameBroker: a kept broker serves a trial that wants the same kind,
// port and config and no plugin it lacks.
func TestSameBroker(t *testing.T) {
	kept := BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100, Plugins: []string{"rabbitmq_stream", "rabbitmq_amqp1_0"}}
	for _, c := range []struct {
		want BrokerSpec
		same bool
	}{
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100}, true},
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100, Plugins: []string{"rabbitmq_amqp1_0"}}, true},
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100, Plugins: []string{"rabbitmq_mqtt"}}, false},
		{BrokerSpec{Kind: BrokerNATS, Port: 7100}, false},
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7101}, false},
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100, ExtraConfig: "x = y\n"}, false},
		{BrokerSpec{Kind: BrokerRabbitMQ, Port: 7100, Stream: true, AdvertisedHost: "198.18.2.2"}, false},
	} {
		if got := kept.sameBroker(c.want); got != c.same {
			t.Errorf("%+v serves %+v: %v, want %v", kept, c.want, got, c.same)
		}
	}
}
