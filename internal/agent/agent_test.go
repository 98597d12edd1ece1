package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/spanperf/spanperf/internal/results"
)

func TestHeaderRoundTrip(t *testing.T) {
	m, f, q, r, err := decodeHeader(encodeHeader(ModeRR, flagPersistent, 64, 1<<20))
	if err != nil || m != ModeRR || f != flagPersistent || q != 64 || r != 1<<20 {
		t.Fatalf("got %d %d %d %d %v", m, f, q, r, err)
	}
	if _, _, _, _, err := decodeHeader([]byte("GET / HTTP/1.1\r\n")); err == nil {
		t.Error("accepted a foreign header")
	}
}

func TestClientSpecValidate(t *testing.T) {
	tgt := netip.MustParseAddrPort("127.0.0.1:1")
	bad := []ClientSpec{
		{Mode: "udp", Target: tgt, Duration: time.Second},
		{Mode: "stream", Duration: time.Second, MessageSize: 1, Streams: 1},
		{Mode: "stream", Target: tgt, MessageSize: 1, Streams: 1},
		{Mode: "stream", Target: tgt, Duration: time.Second, Streams: 1},
		{Mode: "rr", Target: tgt, Duration: time.Second, RequestSize: 1, ResponseSize: 1},
	}
	for _, s := range bad {
		if s.Validate() == nil {
			t.Errorf("%+v: want an error", s)
		}
	}
}

// serve starts a server on loopback (the only traffic these unit tests make).
func serve(t *testing.T) netip.AddrPort {
	t.Helper()
	addr, _ := serveNamed(t, "")
	return netip.MustParseAddrPort(addr)
}

func TestClientsOnLoopback(t *testing.T) {
	addr := serve(t)
	base := ClientSpec{Target: addr, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond, Interval: 200 * time.Millisecond}
	st := base
	st.Mode, st.MessageSize, st.Streams = "stream", 16384, 2
	res, err := RunClient(st)
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics[results.ThroughputBPS] <= 0 || len(res.Series[results.ThroughputBPS].Values) != 2 {
		t.Errorf("stream: %+v", res.Metrics)
	}
	// bytes and duration agree with the rate.
	if got := res.Metrics["bytes"] * 8 / res.Metrics["duration_s"]; got != res.Metrics[results.ThroughputBPS] {
		t.Errorf("throughput %g != bytes×8/duration %g", res.Metrics[results.ThroughputBPS], got)
	}
	for _, mode := range []string{"rr", "crr"} {
		s := base
		s.Mode, s.RequestSize, s.ResponseSize, s.Concurrency = mode, 100, 3000, 2
		res, err := RunClient(s)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		rate := results.TransactionsPerS
		if mode == "crr" {
			rate = results.ConnectionsPerS
		}
		h, err := hdrhistogram.Decode([]byte(res.Histogram))
		if err != nil {
			t.Fatalf("%s: histogram: %v", mode, err)
		}
		if float64(h.TotalCount()) != res.Metrics["transactions"] || h.TotalCount() == 0 {
			t.Errorf("%s: histogram holds %d, transactions %g", mode, h.TotalCount(), res.Metrics["transactions"])
		}
		if res.Metrics[rate] <= 0 || res.Metrics[results.LatencyP50] > res.Metrics[results.LatencyP99] {
			t.Errorf("%s: %+v", mode, res.Metrics)
		}
	}
}

func TestMainClientReportsErrorAsJSON(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	var out, errOut bytes.Buffer
	code := Main([]string{"client", "--mode", "rr", "--target", addr, "--duration", "100ms", "--request-size", "1", "--response-size", "1"}, &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !strings.Contains(r.Error, "connect") {
		t.Errorf("result %q (%v), want a connect error", out.String(), err)
	}
	if code := Main([]string{"client", "--mode", "rr", "--target", "nope"}, &out, &errOut); code != 2 {
		t.Errorf("bad target: exit %d, want 2", code)
	}
}

func TestResolveTarget(t *testing.T) {
	ctx := context.Background()
	if ap, err := ResolveTarget(ctx, "198.18.0.1:7100"); err != nil || ap.String() != "198.18.0.1:7100" {
		t.Errorf("address: %v %v", ap, err)
	}
	if ap, err := ResolveTarget(ctx, "localhost:7100"); err != nil || !ap.Addr().IsLoopback() || ap.Port() != 7100 {
		t.Errorf("localhost: %v %v", ap, err)
	}
	for _, bad := range []string{"198.18.0.1", "localhost:http", ":7100", "localhost:0", "no-such-host.invalid:7100"} {
		if _, err := ResolveTarget(ctx, bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: want an error naming it, got %v", bad, err)
		}
	}
}
