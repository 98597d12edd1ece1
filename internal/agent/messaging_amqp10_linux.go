package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	amqp10 "github.com/Azure/go-amqp"
)

// ProtocolAMQP10 is AMQP 1.0, spoken by RabbitMQ through its
// rabbitmq_amqp1_0 plugin on the broker's AMQP port (the plugin tells the
// two protocols apart by their header).
const ProtocolAMQP10 = "amqp10"

// Addresses as RabbitMQ 3.10's rabbitmq_amqp1_0 plugin reads them
// (rabbit_routing_util:parse_endpoint): "/queue/NAME" declares the queue
// NAME and routes to it through the default exchange; "/queue" alone, as
// a target, routes each message by its subject through the default
// exchange. The plugin declares a "/queue/NAME" whose terminus is not
// durable as exclusive to the declaring connection, so the request queue,
// which the clients and the responder share, is always declared durable
// (the broker is the trial's own: nothing outlives it); a reply queue,
// consumed only by its client, is the client's exclusive queue.
const (
	amqp10RequestAddr = "/queue/" + RequestQueue
	amqp10ReplyTarget = "/queue"
	amqp10ReplyPrefix = "spanperf.reply."
)

// amqp10Dial opens an AMQP 1.0 connection and one session to target as
// guest (SASL PLAIN; RabbitMQ's config lets guest in from any address).
func amqp10Dial(ctx context.Context, target string) (*amqp10.Conn, *amqp10.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	conn, err := amqp10.Dial(ctx, "amqp://"+target, &amqp10.ConnOptions{
		SASLType:    amqp10.SASLTypePlain("guest", "guest"),
		ContainerID: "spanperf",
		IdleTimeout: 10 * time.Second,
		// RabbitMQ 3.10 reads the vhost from "vhost:NAME".
		HostName: "vhost:/",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("amqp10 dial %s: %w", target, err)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("amqp10 session %s: %w", target, err)
	}
	return conn, sess, nil
}

// amqp10Sender attaches a link to addr whose messages go pre-settled:
// no confirms, as AMQP 0-9-1's publish here, durable or not.
func amqp10Sender(ctx context.Context, sess *amqp10.Session, addr string) (*amqp10.Sender, error) {
	mode := amqp10.SenderSettleModeSettled
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	s, err := sess.NewSender(ctx, addr, &amqp10.SenderOptions{SettlementMode: &mode, TargetDurability: amqp10.DurabilityConfiguration})
	if err != nil {
		return nil, fmt.Errorf("amqp10 attach sender to %s: %w", addr, err)
	}
	return s, nil
}

// amqp10Receiver attaches a link that receives from addr with credit
// messages unsettled at a time (each is accepted once handled, and the
// library grants the credit back).
func amqp10Receiver(ctx context.Context, sess *amqp10.Session, addr string, credit int, durable bool) (*amqp10.Receiver, error) {
	d := amqp10.DurabilityNone
	if durable {
		d = amqp10.DurabilityConfiguration
	}
	mode := amqp10.SenderSettleModeUnsettled
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	r, err := sess.NewReceiver(ctx, addr, &amqp10.ReceiverOptions{Credit: int32(max(credit, 1)), SourceDurability: d,
		RequestedSenderSettleMode: &mode})
	if err != nil {
		return nil, fmt.Errorf("amqp10 attach receiver from %s: %w", addr, err)
	}
	return r, nil
}

// amqp10Message is a message with body, its durable header set when
// durable.
func amqp10Message(body []byte, props *amqp10.MessageProperties, durable bool) *amqp10.Message {
	m := &amqp10.Message{Data: [][]byte{body}, Properties: props}
	if durable {
		m.Header = &amqp10.MessageHeader{Durable: true}
	}
	return m
}

// amqp10Client is one client connection: requests to the request queue,
// replies from the connection's own exclusive queue.
type amqp10Client struct {
	conn    *amqp10.Conn
	sender  *amqp10.Sender
	recv    *amqp10.Receiver
	replyTo string
	durable bool
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func dialAMQP10Client(target string, inFlight int, durable bool, onReply func(uint64, int)) (_ *amqp10Client, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &amqp10Client{durable: durable, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	conn, sess, err := amqp10Dial(ctx, target)
	if err != nil {
		cancel()
		return nil, err
	}
	c.conn = conn
	defer func() {
		if err != nil {
			cancel()
			conn.Close()
		}
	}()
	if c.sender, err = amqp10Sender(ctx, sess, amqp10RequestAddr); err != nil {
		return nil, err
	}
	var tag [8]byte
	rand.Read(tag[:])
	c.replyTo = amqp10ReplyPrefix + hex.EncodeToString(tag[:])
	if c.recv, err = amqp10Receiver(ctx, sess, "/queue/"+c.replyTo, inFlight, false); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.done)
		for {
			m, err := c.recv.Receive(ctx, nil)
			if err != nil {
				return
			}
			var id uint64
			if m.Properties != nil {
				if s, ok := m.Properties.CorrelationID.(string); ok {
					id, _ = strconv.ParseUint(s, 10, 64)
				}
			}
			if c.recv.AcceptMessage(ctx, m) != nil {
				return
			}
			onReply(id, len(m.GetData()))
		}
	}()
	return c, nil
}

// Send sends request id, pre-settled.
func (c *amqp10Client) Send(id uint64, body []byte) error {
	replyTo := c.replyTo
	m := amqp10Message(body, &amqp10.MessageProperties{CorrelationID: strconv.FormatUint(id, 10), ReplyTo: &replyTo}, c.durable)
	ctx, cancel := context.WithTimeout(c.ctx, ioTimeout)
	defer cancel()
	return c.sender.Send(ctx, m, nil)
}

func (c *amqp10Client) Close() {
	c.cancel()
	c.conn.Close()
	<-c.done
}

// serveAMQP10Consumer is one of the responder's connections: it receives
// requests with credit inFlight and sends each body back through the
// default exchange to the request's reply queue (its reply-to), durable
// when the request is, then accepts the request. It returns the
// connection's close; a failure afterwards goes to errc.
func serveAMQP10Consumer(ctx context.Context, s MessagingResponderSpec, errc chan<- error) (func(), error) {
	conn, sess, err := amqp10Dial(ctx, s.Target)
	if err != nil {
		return nil, err
	}
	closeConn := func() { conn.Close() }
	recv, err := amqp10Receiver(ctx, sess, amqp10RequestAddr, s.InFlight, true)
	if err != nil {
		conn.Close()
		return nil, err
	}
	send, err := amqp10Sender(ctx, sess, amqp10ReplyTarget)
	if err != nil {
		conn.Close()
		return nil, err
	}
	go func() {
		for {
			m, err := recv.Receive(ctx, nil)
			if err != nil {
				if ctx.Err() == nil {
					errc <- fmt.Errorf("amqp10 receive: %w", err)
				}
				return
			}
			holdFor(s.Delay)
			if err := amqp10Reply(ctx, send, m, s.Durable); err != nil {
				errc <- err
				return
			}
			if err := recv.AcceptMessage(ctx, m); err != nil {
				errc <- fmt.Errorf("amqp10 accept: %w", err)
				return
			}
		}
	}()
	return closeConn, nil
}

// amqp10Reply sends m's body back to m's reply queue. The reply-to is
// the queue's name, or "/queue/NAME" as the plugin writes it for a
// request that came in over AMQP 0-9-1.
func amqp10Reply(ctx context.Context, send *amqp10.Sender, m *amqp10.Message, durable bool) error {
	if m.Properties == nil || m.Properties.ReplyTo == nil {
		return errors.New("amqp10: request without reply-to")
	}
	subject := strings.TrimPrefix(*m.Properties.ReplyTo, "/queue/")
	reply := amqp10Message(m.GetData(), &amqp10.MessageProperties{CorrelationID: m.Properties.CorrelationID, Subject: &subject}, durable)
	ctx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	if err := send.Send(ctx, reply, nil); err != nil {
		return fmt.Errorf("amqp10 reply to %s: %w", subject, err)
	}
	return nil
}
