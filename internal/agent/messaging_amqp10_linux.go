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
// exchange. As a target, a "/queue/NAME" whose terminus is not durable is
// declared exclusive to the declaring connection, so the request queue,
// which the clients and the responder share, is always declared durable
// (the broker is the trial's own: nothing outlives it). As a source, the
// plugin declares it neither exclusive nor auto-deleted: each client's
// reply queue, a fresh name, stays until the broker stops.
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
		// The plugin reads the hostname "vhost:NAME" as the vhost
		// (else its default_vhost, "/" too).
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

// amqp10Delivery is a message received and the link it came on (which
// accepts it), or the error that ended that link.
type amqp10Delivery struct {
	m   *amqp10.Message
	r   *amqp10.Receiver
	err error
}

// amqp10Receivers attaches n links that receive from addr, each with a
// link credit of one, and merges what they receive into one channel; each
// link gets its next message once its last is accepted, so n is the
// messages unsettled at a time, as a credit of n on one link would be.
// One link of credit n fails here: RabbitMQ 3.10's plugin sends a link
// more than its credit when a flow frame crosses deliveries under way to
// it (seen with a credit of 4 at a few hundred messages/s), go-amqp's
// count of the link's credit then wraps below zero, and the link never
// grants credit again. A link of credit one has no delivery under way
// when it grants the next. A link's end arrives once, as err.
func amqp10Receivers(ctx context.Context, sess *amqp10.Session, addr string, n int, durable bool) (<-chan amqp10Delivery, error) {
	d := amqp10.DurabilityNone
	if durable {
		d = amqp10.DurabilityConfiguration
	}
	mode := amqp10.SenderSettleModeUnsettled
	out := make(chan amqp10Delivery)
	for range max(n, 1) {
		actx, cancel := context.WithTimeout(ctx, ioTimeout)
		r, err := sess.NewReceiver(actx, addr, &amqp10.ReceiverOptions{Credit: 1, SourceDurability: d, RequestedSenderSettleMode: &mode})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("amqp10 attach receiver from %s: %w", addr, err)
		}
		go func() {
			for {
				m, err := r.Receive(ctx, nil)
				select {
				case out <- amqp10Delivery{m: m, r: r, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return out, nil
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
// replies from the connection's own reply queue.
type amqp10Client struct {
	conn    *amqp10.Conn
	sender  *amqp10.Sender
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
	replies, err := amqp10Receivers(ctx, sess, "/queue/"+c.replyTo, inFlight, false)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(c.done)
		for {
			var d amqp10Delivery
			select {
			case d = <-replies:
			case <-ctx.Done():
				return
			}
			if d.err != nil || d.r.AcceptMessage(ctx, d.m) != nil {
				return
			}
			var id uint64
			if d.m.Properties != nil {
				if s, ok := d.m.Properties.CorrelationID.(string); ok {
					id, _ = strconv.ParseUint(s, 10, 64)
				}
			}
			onReply(id, len(d.m.GetData()))
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
// requests on InFlight links of credit one (amqp10Receivers), handling
// them one at a time, and sends each body back through the
// default exchange to the request's reply queue (its reply-to), durable
// when the request is, then accepts the request. It returns the
// connection's close; a failure afterwards goes to errc.
func serveAMQP10Consumer(ctx context.Context, s MessagingResponderSpec, errc chan<- error) (func(), error) {
	conn, sess, err := amqp10Dial(ctx, s.Target)
	if err != nil {
		return nil, err
	}
	closeConn := func() { conn.Close() }
	requests, err := amqp10Receivers(ctx, sess, amqp10RequestAddr, s.InFlight, true)
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
			var d amqp10Delivery
			select {
			case d = <-requests:
			case <-ctx.Done():
				return
			}
			if d.err != nil {
				if ctx.Err() == nil {
					errc <- fmt.Errorf("amqp10 receive: %w", d.err)
				}
				return
			}
			holdFor(s.Delay)
			if err := amqp10Reply(ctx, send, d.m, s.Durable); err != nil {
				errc <- err
				return
			}
			if err := d.r.AcceptMessage(ctx, d.m); err != nil {
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
