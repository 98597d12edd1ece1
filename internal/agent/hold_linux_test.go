package agent

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// startHoldServe runs HoldServe on a loopback port and returns its address.
func startHoldServe(t *testing.T, count int) netip.AddrPort {
	t.Helper()
	// Find a free port, then serve on it (HoldServe prints its address
	// only on stdout, which this test reads).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	go HoldServe("127.0.0.1:0", count, pw)
	var r Ready
	if err := json.NewDecoder(pr).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return netip.MustParseAddrPort(r.Addr)
}

// TestHoldLoopback: 300 connections at 3000/s open, each answers its
// first keepalive, keepalives every 50 ms are answered while held, and
// the connect rate never exceeds the rate asked.
func TestHoldLoopback(t *testing.T) {
	addr := startHoldServe(t, 300)
	release := make(chan struct{})
	var opened bytes.Buffer
	done := make(chan struct{})
	var res *Result
	var err error
	go func() {
		defer close(done)
		res, err = Hold(HoldSpec{Target: addr, Count: 300, ConnectRate: 3000, Keepalive: 50 * time.Millisecond}, &opened, release)
	}()
	time.Sleep(600 * time.Millisecond)
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	var o HoldOpened
	if err := json.Unmarshal(opened.Bytes(), &o); err != nil {
		t.Fatalf("opened line %q: %v", opened.String(), err)
	}
	m := res.Metrics
	t.Logf("opened %+v; metrics %v", o, m)
	if o.Open != 300 || o.Failures != 0 || m[results.OpenConnections] != 300 || m[results.ConnectFailures] != 0 {
		t.Errorf("open %d, failures %d (%s); want 300 and 0", o.Open, o.Failures, o.FirstError)
	}
	// The pacer starts none early: opening takes at least 299/3000 s.
	// (How fast the machine opens them beyond that is its load's.)
	if r := m[results.ConnectRatePerS]; r <= 0 || r > 3000*300/299.0*1.01 || o.ConnectSeconds < 299/3000.0 {
		t.Errorf("connect rate %.0f/s over %.3f s, asked 3000/s", r, o.ConnectSeconds)
	}
	// Every connection exchanges keepalives while held, and none more
	// often than every 50 ms.
	held := m["held_s"]
	if k := m[results.Keepalives]; k < 300 || k > 300*(held/0.05+1) || m[results.KeepaliveFailures] != 0 {
		t.Errorf("keepalives %v over %.3f s, failures %v; want 300 to %.0f and 0", k, held, m[results.KeepaliveFailures], 300*(held/0.05+1))
	}
}

// TestHoldFailures: connections to a port where nothing listens fail,
// and a hold where none opened is an error naming the first failure.
func TestHoldFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	var opened bytes.Buffer
	_, err = Hold(HoldSpec{Target: addr, Count: 5}, &opened, make(chan struct{}))
	if err == nil || !strings.Contains(err.Error(), "none of 5 connections") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err %v, want none of 5 opened, connection refused", err)
	}
	if !strings.Contains(opened.String(), `"failures":5`) {
		t.Errorf("opened line %q, want 5 failures", opened.String())
	}
}

// TestHoldLimits: limits that bind are errors that name them.
func TestHoldLimits(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 1<<30 {
		err := RaiseNofile(int(lim.Max) + 1)
		if err == nil || !strings.Contains(err.Error(), "RLIMIT_NOFILE") || !strings.Contains(err.Error(), "hard limit") {
			t.Errorf("RaiseNofile above the hard limit: %v", err)
		}
	}
	f := filepath.Join(t.TempDir(), "range")
	os.WriteFile(f, []byte("32768\t60999\n"), 0o644)
	if err := widenPortRange(f, 1000); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); string(b) != "32768\t60999\n" {
		t.Errorf("range rewritten to %q for 1000 connections", b)
	}
	if err := widenPortRange(f, 40000); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); string(b) != "1024 65535" {
		t.Errorf("range %q for 40000 connections, want 1024 65535", b)
	}
	err := widenPortRange(f, 70000)
	if err == nil || !strings.Contains(err.Error(), "net.ipv4.ip_local_port_range") {
		t.Errorf("70000 connections: %v, want an error naming net.ipv4.ip_local_port_range", err)
	}
	err = HoldSpec{Target: netip.MustParseAddrPort("127.0.0.1:1"), Count: 100000, Keepalive: time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), "keepalive") {
		t.Errorf("100000 keepalives/s: %v", err)
	}
}
