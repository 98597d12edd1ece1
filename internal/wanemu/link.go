// Package wanemu is a userspace WAN emulator for kernels without netem. It
// runs in the testbed's wan namespace: the packets the sites send each other
// are routed (by policy rules on the sites' links) into a TUN device, held
// there for each link's delay, jitter, loss and rate, and written back to
// the TUN device, from which the kernel routes them on to their site.
//
// The TUN device carries GSO packets (up to 64 KiB, with virtio-net
// headers), so a bulk TCP flow costs the emulator one read and one write per
// 64 KiB rather than per segment. Where a link loses packets, the device is
// opened without segmentation offloads, so loss applies to each packet on
// the wire, as netem's does.
//
// The timing model is a bottleneck link followed by a propagation delay: a
// packet waits for the link to be free (at Rate, in wire bytes, with a
// backlog of at most QueueBytes: more is dropped at the tail), then travels
// for Delay plus a uniform jitter in ±Jitter (so jitter may reorder packets,
// as netem's does).
package wanemu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"
)

// LinkSpec is what one direction of a link between two sites does to the
// packets crossing it. Its zero value passes them unchanged.
type LinkSpec struct {
	// Delay is the one-way propagation delay.
	Delay time.Duration
	// Jitter spreads each packet's delay uniformly over Delay±Jitter (never
	// below zero).
	Jitter time.Duration
	// Loss is the probability, 0 to 1, that a packet is dropped.
	Loss float64
	// RateBPS, when > 0, is the link's rate in bits per second of wire
	// bytes (IP packets plus 14 bytes of Ethernet header each).
	RateBPS int64
	// QueueBytes bounds the backlog waiting for a rate-limited link;
	// 0 means DefaultQueueBytes.
	QueueBytes int64
}

// DefaultQueueBytes is a rate-limited link's backlog when QueueBytes is 0:
// a thousand full-size packets, netem's default limit.
const DefaultQueueBytes = 1000 * 1514

// Normalize fills the defaults.
func (l *LinkSpec) Normalize() {
	if l.RateBPS > 0 && l.QueueBytes == 0 {
		l.QueueBytes = DefaultQueueBytes
	}
}

// Validate reports values the emulator cannot apply.
func (l LinkSpec) Validate() error {
	switch {
	case l.Delay < 0 || l.Jitter < 0:
		return fmt.Errorf("delay %v, jitter %v: must not be negative", l.Delay, l.Jitter)
	case l.Delay > time.Minute:
		return fmt.Errorf("delay %v: at most 1m", l.Delay)
	case !(l.Loss >= 0 && l.Loss < 1):
		return fmt.Errorf("loss %v: want 0 <= loss < 1", l.Loss)
	case l.RateBPS < 0 || l.QueueBytes < 0:
		return errors.New("rate and queue must not be negative")
	}
	return nil
}

// String renders the spec as the agent's --link flag takes it.
func (l LinkSpec) String() string {
	return fmt.Sprintf("delay=%s,jitter=%s,loss=%g,rate=%d,queue=%d", l.Delay, l.Jitter, l.Loss, l.RateBPS, l.QueueBytes)
}

// Route says which LinkSpec applies to a packet from one prefix to
// another. A packet matches the first route whose From holds its source
// and whose To holds its destination; a packet that matches none passes
// with no delay.
type Route struct {
	From, To netip.Prefix
	Link     LinkSpec
}

// ethOverhead is what a packet costs on the wire beyond its IP bytes.
const ethOverhead = 14

// link is the state of one direction of a link: when its bottleneck is
// next free, and its random source.
type link struct {
	spec LinkSpec
	// busy is when the last accepted packet leaves the bottleneck.
	busy time.Time
	rng  *rand.Rand
}

// verdict is what a link does with one packet.
type verdict int

const (
	pass verdict = iota
	lost
	queueFull
)

// admit decides the fate of a packet of wire bytes (segs segments) that
// arrives at now, and when it leaves the link.
func (k *link) admit(now time.Time, wire int64, segs int) (time.Time, verdict) {
	if k.spec.Loss > 0 {
		for range segs {
			if k.rng.Float64() < k.spec.Loss {
				return time.Time{}, lost
			}
		}
	}
	out := now
	if r := k.spec.RateBPS; r > 0 {
		start := now
		if k.busy.After(now) {
			backlog := int64(float64(k.busy.Sub(now).Seconds()) * float64(r) / 8)
			if backlog+wire > k.spec.QueueBytes {
				return time.Time{}, queueFull
			}
			start = k.busy
		}
		k.busy = start.Add(time.Duration(float64(wire*8) / float64(r) * float64(time.Second)))
		out = k.busy
	}
	d := k.spec.Delay
	if j := k.spec.Jitter; j > 0 {
		d += time.Duration((k.rng.Float64()*2 - 1) * float64(j))
		if d < 0 {
			d = 0
		}
	}
	return out.Add(d), pass
}

// newRand is a link's random source.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5350414e)) }
