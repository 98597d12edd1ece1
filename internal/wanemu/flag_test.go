package wanemu

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestRouteRoundTrip(t *testing.T) {
	r := Route{From: netip.MustParsePrefix("198.18.1.0/24"), To: netip.MustParsePrefix("198.18.2.0/24"),
		Link: LinkSpec{Delay: 10 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.01, RateBPS: 100e6, QueueBytes: 2 << 20}}
	s := FormatRoute(r)
	if s != "198.18.1.0/24>198.18.2.0/24:delay=10ms,jitter=1ms,loss=0.01,rate=100000000,queue=2097152" {
		t.Errorf("format: %s", s)
	}
	got, err := ParseRoute(s)
	if err != nil || got != r {
		t.Errorf("parse %s: %+v, %v", s, got, err)
	}
	for in, want := range map[string]string{
		"198.18.1.0/24:delay=1ms":                "want FROM>TO",
		"198.18.1.0/24>x:delay=1ms":              "to:",
		"198.18.1.0/24>198.18.2.0/24:delay=soon": "delay:",
		"198.18.1.0/24>198.18.2.0/24:loss=1.5":   "loss 1.5",
		"198.18.1.0/24>198.18.2.0/24:color=blue": `unknown key "color"`,
		"198.18.1.0/24>198.18.2.0/24:delay=-1ms": "must not be negative",
	} {
		if _, err := ParseRoute(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", in, err, want)
		}
	}
}

// TestAdmit checks the link model with a fixed clock: serialization at
// the rate, then the delay; a full backlog drops; jitter stays in bounds.
func TestAdmit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	k := &link{spec: LinkSpec{Delay: 10 * time.Millisecond, RateBPS: 8e6, QueueBytes: 3000}}
	k.spec.Normalize()
	// 1000 wire bytes at 8 Mbit/s take 1 ms.
	at, v := k.admit(t0, 1000, 1)
	if v != pass || at != t0.Add(11*time.Millisecond) {
		t.Errorf("first: %v %v", at.Sub(t0), v)
	}
	at, _ = k.admit(t0, 1000, 1)
	if at != t0.Add(12*time.Millisecond) {
		t.Errorf("second waits for the first: %v", at.Sub(t0))
	}
	k.admit(t0, 1000, 1)
	if _, v := k.admit(t0, 1000, 1); v != queueFull {
		t.Errorf("fourth with a 3000-byte backlog: %v, want queue full", v)
	}
	j := &link{spec: LinkSpec{Delay: 5 * time.Millisecond, Jitter: 2 * time.Millisecond}, rng: newRand(1)}
	for range 1000 {
		at, _ := j.admit(t0, 100, 1)
		if d := at.Sub(t0); d < 3*time.Millisecond || d > 7*time.Millisecond {
			t.Fatalf("jittered delay %v outside 5ms ± 2ms", d)
		}
	}
}
