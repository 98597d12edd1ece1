package netns_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// TestIsolate: a site cut off the underlay neither reaches nor is reached
// (a connect times out: nothing answers, not even a reset), and reaches
// again once restored.
func TestIsolate(t *testing.T) {
	tb := newTestbed(t, netns.Spec{Sites: 3})
	a, b, c := tb.LocalSites()[0], tb.LocalSites()[1], tb.LocalSites()[2]
	var ln net.Listener
	if err := b.Do(func() (err error) {
		ln, err = net.Listen("tcp", b.Addr().String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(from *netns.Site, addr string, limit time.Duration) error {
		return from.Do(func() error {
			c, err := net.DialTimeout("tcp", addr, limit)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	if err := dial(a, ln.Addr().String(), 3*time.Second); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	restore, err := tb.Isolate(b)
	if err != nil {
		t.Fatal(err)
	}
	timedOut := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	if err := dial(a, ln.Addr().String(), 300*time.Millisecond); !timedOut(err) {
		t.Errorf("a → isolated b: %v, want a timeout", err)
	}
	if err := dial(b, c.Addr().String()+":9", 300*time.Millisecond); !timedOut(err) {
		t.Errorf("isolated b → c: %v, want a timeout", err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if err := dial(a, ln.Addr().String(), 3*time.Second); err != nil {
		t.Errorf("after restore: %v", err)
	}
}
