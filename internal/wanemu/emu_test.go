package wanemu_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/roottest"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/wanemu"
)

// bed is a two-site local testbed: sites a (198.18.1.2) and b (198.18.2.2)
// routed by the wan namespace.
func bed(t *testing.T) *netns.Testbed {
	t.Helper()
	roottest.Require(t, "creates network namespaces and a TUN device")
	tb, err := netns.New(context.Background(), netns.Spec{Run: fmt.Sprintf("wt%06x", rand.IntN(1<<24))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// emulate starts an emulator in tb's wan namespace with link ab on packets
// from a to b and ba on those from b to a.
func emulate(t *testing.T, tb *netns.Testbed, ab, ba wanemu.LinkSpec) *wanemu.Emulator {
	t.Helper()
	pa, pb := netns.UnderlayPrefix(0), netns.UnderlayPrefix(1)
	var e *wanemu.Emulator
	err := tb.WAN().Do(func() (err error) {
		e, err = wanemu.New(wanemu.Spec{Routes: []wanemu.Route{{From: pa, To: pb, Link: ab}, {From: pb, To: pa, Link: ba}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// site returns tb's site i.
func site(tb *netns.Testbed, i int) *netns.Site { return tb.LocalSites()[i] }

// listen listens on TCP port 7200 in s.
func listen(t *testing.T, s *netns.Site, network string) (ln net.Listener, pc net.PacketConn) {
	t.Helper()
	err := s.Do(func() (err error) {
		if network == "udp" {
			pc, err = net.ListenPacket("udp4", s.Addr().String()+":7201")
			return err
		}
		ln, err = net.Listen("tcp4", s.Addr().String()+":7200")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ln, pc
}

// dial dials addr from s.
func dial(t *testing.T, s *netns.Site, network, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	err := s.Do(func() (err error) {
		c, err = net.DialTimeout(network, addr, 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rrP50 runs n one-byte request/response transactions from a to b's echo
// server and returns their median time.
func rrP50(t *testing.T, tb *netns.Testbed, n int) time.Duration {
	t.Helper()
	ln, _ := listen(t, site(tb, 1), "tcp")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c := dial(t, site(tb, 0), "tcp4", ln.Addr().String())
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	b := []byte{1}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestDelayKnownAnswer: 10 ms one way each way adds 20 ms to the median
// round trip, within ±0.5 ms, and the emulator's own lateness is small.
func TestDelayKnownAnswer(t *testing.T) {
	tb := bed(t)
	native := rrP50(t, tb, 200)
	e := emulate(t, tb, wanemu.LinkSpec{Delay: 10 * time.Millisecond}, wanemu.LinkSpec{Delay: 10 * time.Millisecond})
	delayed := rrP50(t, tb, 100)
	added := delayed - native
	st := e.Stats()
	t.Logf("native p50 %v, delayed p50 %v: added %v; emulator %+v", native, delayed, added, st)
	if d := added - 20*time.Millisecond; d < -500*time.Microsecond || d > 500*time.Microsecond {
		t.Errorf("added round trip %v, want 20ms ± 0.5ms", added)
	}
	if st.PacketsIn < 200 || st.Unmatched > st.PacketsIn/10 {
		t.Errorf("emulator saw %d packets, %d unmatched: the traffic did not cross it", st.PacketsIn, st.Unmatched)
	}
	// Close removes the device and rules: the round trip is native again.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if after := rrP50(t, tb, 100); after > native+2*time.Millisecond {
		t.Errorf("after Close the round trip is %v (native %v): the emulator's routing stayed", after, native)
	}
}

// TestLossKnownAnswer: 1% loss on a→b drops 1% ± 0.3 points of 20,000 UDP
// datagrams, and none the other way.
func TestLossKnownAnswer(t *testing.T) {
	tb := bed(t)
	e := emulate(t, tb, wanemu.LinkSpec{Loss: 0.01}, wanemu.LinkSpec{})
	_, pc := listen(t, site(tb, 1), "udp")
	defer pc.Close()
	pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	var got atomic.Int64
	go func() {
		b := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	c := dial(t, site(tb, 0), "udp4", pc.LocalAddr().String())
	const n = 20000
	b := make([]byte, 200)
	for i := range n {
		binary.BigEndian.PutUint32(b, uint32(i))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if i%200 == 199 {
			time.Sleep(2 * time.Millisecond) // stay under the receiver's buffer
		}
	}
	time.Sleep(300 * time.Millisecond)
	loss := 1 - float64(got.Load())/n
	st := e.Stats()
	t.Logf("sent %d, received %d: loss %.3f%%; emulator %+v", n, got.Load(), loss*100, st)
	if loss < 0.007 || loss > 0.013 {
		t.Errorf("loss %.3f%%, want 1%% ± 0.3 points", loss*100)
	}
	if st.Offload {
		t.Error("a lossy emulator carried GSO packets: loss would apply to 64 KiB at once")
	}
	if int64(st.Lost) != n-got.Load() {
		t.Errorf("emulator lost %d, receiver missed %d", st.Lost, n-got.Load())
	}
}

// TestRateDelayKnownAnswer: a 100 Mbit/s link with 50 ms one-way delay
// carries a TCP stream at ≥ 0.9 of its rate given socket buffers larger
// than the bandwidth-delay product (1.25 MB).
func TestRateDelayKnownAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("8 s of stream")
	}
	tb := bed(t)
	const rate = 100e6
	e := emulate(t, tb, wanemu.LinkSpec{Delay: 50 * time.Millisecond, RateBPS: rate, QueueBytes: 2 << 20}, wanemu.LinkSpec{Delay: 50 * time.Millisecond})
	ln, _ := listen(t, site(tb, 1), "tcp")
	defer ln.Close()
	const buf = 8 << 20
	var rcvd atomic.Int64
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(buf)
		b := make([]byte, 1<<20)
		for {
			n, err := c.Read(b)
			rcvd.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	c := dial(t, site(tb, 0), "tcp4", ln.Addr().String())
	c.(*net.TCPConn).SetWriteBuffer(buf)
	stop := time.Now().Add(8 * time.Second)
	go func() {
		b := make([]byte, 1<<16)
		for time.Now().Before(stop) {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
		c.Close()
	}()
	time.Sleep(3 * time.Second) // slow start over a 100 ms round trip
	r0, t0 := rcvd.Load(), time.Now()
	time.Sleep(4 * time.Second)
	got := float64(rcvd.Load()-r0) * 8 / time.Since(t0).Seconds()
	t.Logf("goodput %.1f Mbit/s of %.0f (socket buffers %d B requested); emulator %+v", got/1e6, rate/1e6, buf, e.Stats())
	if got < 0.9*rate {
		t.Errorf("goodput %.1f Mbit/s, want ≥ 90 Mbit/s", got/1e6)
	}
	if got > 1.0*rate {
		t.Errorf("goodput %.1f Mbit/s exceeds the 100 Mbit/s link", got/1e6)
	}
}
