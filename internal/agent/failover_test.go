package agent

import (
	"context"
	"net"
	"testing"
	"time"
)

// serveNamed runs an agent server answering mode who with name on a
// loopback port; stop closes its listener (the server is gone: new
// connections are refused).
func serveNamed(t *testing.T, name string) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c.(*net.TCPConn), name)
		}
	}()
	return ln.Addr().String(), func() { ln.Close() }
}

// TestRelaySwitchAfter is the failover known answer in process: a relay
// whose primary goes away switches to its backup a known 300 ms after its
// first failed dial, and the failover probe through it sees the answering
// server change from b to c with a gap of 300 ms (within 30 ms), failed
// transactions in between, and none before or after.
func TestRelaySwitchAfter(t *testing.T) {
	b, stopB := serveNamed(t, "b")
	c, _ := serveNamed(t, "c")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	go Relay(ctx, RelaySpec{Listen: "127.0.0.1:0", To: b, Backup: c, SwitchAfter: 300 * time.Millisecond}, func(a net.Addr) { addrc <- a })
	addr := (<-addrc).String()
	var killed time.Time
	go func() {
		time.Sleep(300 * time.Millisecond)
		killed = time.Now()
		stopB()
	}()
	run := Failover(ctx, addr, time.Millisecond, 900*time.Millisecond, time.Second, nil)
	var lastB, firstC int64
	failed := 0
	for _, a := range run.Attempts {
		switch {
		case a.Site == "b":
			lastB = max(lastB, a.EndNS)
		case a.Site == "c" && (firstC == 0 || a.EndNS < firstC):
			firstC = a.EndNS
		case !a.OK():
			failed++
		}
	}
	if lastB == 0 || firstC == 0 {
		t.Fatalf("answers: last from b %d, first from c %d (of %d attempts)", lastB, firstC, len(run.Attempts))
	}
	gap := time.Duration(firstC - lastB)
	t.Logf("%d attempts, %d failed, gap %v, b killed %v after its last answer", len(run.Attempts), failed, gap, killed.Sub(time.Unix(0, lastB)))
	if gap < 300*time.Millisecond || gap > 330*time.Millisecond {
		t.Errorf("gap %v, want 300 ms to 330 ms", gap)
	}
	if failed < 100 {
		t.Errorf("%d failed transactions in a 300 ms gap at 1 ms intervals, want ≥ 100", failed)
	}
}

// TestRelayValidateBackup: --switch-after needs --backup.
func TestRelayValidateBackup(t *testing.T) {
	if err := (RelaySpec{Listen: ":1", To: "a:1", SwitchAfter: time.Second}).Validate(); err == nil {
		t.Error("switch-after without backup accepted")
	}
	if err := (RelaySpec{Listen: ":1", To: "a:1", Backup: "nope"}).Validate(); err == nil {
		t.Error("backup without a port accepted")
	}
}
