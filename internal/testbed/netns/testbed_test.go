package netns_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/roottest"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func requireRoot(t *testing.T) {
	t.Helper()
	roottest.Require(t, "creates network namespaces")
}

func newTestbed(t *testing.T, spec netns.Spec) *netns.Testbed {
	t.Helper()
	requireRoot(t)
	if spec.Run == "" {
		spec.Run = "t" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")[4:]
	}
	tb, err := netns.New(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// serveIn listens on a free port of site's address until the test ends,
// and hands each connection to handle, then closes it.
func serveIn(t *testing.T, site *netns.Site, handle func(net.Conn)) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := site.Do(func() (err error) {
		ln, err = net.Listen("tcp", site.Addr().String()+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				handle(c)
				c.Close()
			}()
		}
	}()
	return ln
}

// TestSitesReachEachOther builds two sites and carries a TCP exchange from
// a socket in site a to a listener in site b, through the wan router.
func TestSitesReachEachOther(t *testing.T) {
	tb := newTestbed(t, netns.Spec{MTU: 9000})
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	ln := serveIn(t, b, func(c net.Conn) { io.Copy(c, c) })
	var c net.Conn
	if err := a.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 3*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != a.Addr().String() {
		t.Errorf("client address %s, want site a's %s", got, a.Addr())
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	l, err := a.Netlink().LinkByName("eth0")
	if err != nil || l.Attrs().MTU != 9000 {
		t.Errorf("eth0 mtu: %v %v, want 9000", l, err)
	}
}

// TestClientsSpareReservedPorts: a site's kernel never gives a client's
// connection a port that servers and datapaths listen on mid-run
// (netns.ReservedPorts). With the site's ephemeral range narrowed to
// 9990–10009, half of it reserved (9990–9999), 10 connections held open
// get ports 10000–10009 and the 11th finds none; without the reservation
// all 15 would open, at least 5 of them on reserved ports.
func TestClientsSpareReservedPorts(t *testing.T) {
	tb := newTestbed(t, netns.Spec{})
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	ln := serveIn(t, b, func(c net.Conn) { io.Copy(io.Discard, c) })
	if err := a.SetSysctl("net.ipv4.ip_local_port_range", "9990 10009"); err != nil {
		t.Fatal(err)
	}
	var ports []int
	var last error
	if err := a.Do(func() error {
		for range 15 {
			c, err := net.DialTimeout("tcp", ln.Addr().String(), 3*time.Second)
			if err != nil {
				last = err
				break
			}
			t.Cleanup(func() { c.Close() })
			ports = append(ports, c.LocalAddr().(*net.TCPAddr).Port)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ports) != 10 || last == nil {
		t.Errorf("%d connections opened (ports %v; then %v), want 10, then none", len(ports), ports, last)
	}
	for _, p := range ports {
		if p < 10000 || p > 10009 {
			t.Errorf("client port %d: want 10000–10009, outside %s", p, netns.ReservedPorts)
		}
	}
}

// TestCloseRemovesEverything checks that Close leaves no namespace, process,
// temp dir or ledger behind.
func TestCloseRemovesEverything(t *testing.T) {
	tb := newTestbed(t, netns.Spec{Sites: 3, RateBPS: 100e6})
	run := tb.Spec().Run
	p, err := tb.Sites()[0].Exec(context.Background(), testbed.Command{Name: "sleep", Path: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := tb.TempDir()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("process still running after Close")
	}
	assertNoResidue(t, run)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still there", tmp)
	}
}

func assertNoResidue(t *testing.T, run string) {
	t.Helper()
	for _, ns := range netns.ListNamed() {
		if strings.Contains(ns, run) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	if _, err := os.Stat(filepath.Join(testbed.LedgerDir, run+".ledger")); !os.IsNotExist(err) {
		t.Errorf("ledger of %s left behind", run)
	}
	// The testbed's temp dir and the workloads' (spanperf-RUN-KIND-*).
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), netns.Prefix+run+"*"))
	for _, d := range tmps {
		t.Errorf("temp dir %s left behind", d)
	}
}

// TestCleanSweepsAbandonedTestbed leaves a detached testbed with a running
// process (as `spanperf up` does) and checks that Clean without Detached
// keeps it and Clean with Detached removes all of it.
func TestCleanSweepsAbandonedTestbed(t *testing.T) {
	// A run ID as spanperf makes them (6 hex digits), which clean can tell
	// from other names.
	var id [3]byte
	rand.Read(id[:])
	tb := newTestbed(t, netns.Spec{Run: hex.EncodeToString(id[:]), Detach: true})
	run := tb.Spec().Run
	p, err := tb.Sites()[1].Exec(context.Background(), testbed.Command{Name: "sleep", Path: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	// A workload's temp dir, in the ledger; and one a crash left between
	// its making and its ledger entry, known by its name alone.
	wdir, err := tb.Ledger().MkdirTemp("nginx")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(wdir), netns.Prefix+run+"-nginx-") {
		t.Errorf("workload temp dir %s not named after run %s", wdir, run)
	}
	if _, err := os.MkdirTemp("", netns.Prefix+run+"-pgbench-"); err != nil {
		t.Fatal(err)
	}
	tb.Close() // detached: releases handles only
	if rep, err := netns.Clean(netns.CleanOptions{Run: run}); err != nil || len(rep.Removed) != 0 {
		t.Fatalf("clean removed %v (err %v) from a testbed left up on purpose", rep.Removed, err)
	}
	rep, err := netns.Clean(netns.CleanOptions{Run: run, Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed: %v", rep.Removed)
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("process survived clean")
	}
	assertNoResidue(t, run)
}

func TestSpecValidate(t *testing.T) {
	for _, s := range []netns.Spec{{}, {Run: "x", Sites: -1, MTU: 1500}, {Run: "x", Sites: 2, MTU: 100}, {Run: "x", Sites: 2, MTU: 1500, RateBPS: -1}} {
		s2 := s
		if s2.Sites == 0 && s2.Run != "" {
			s2.Normalize()
		}
		if err := s2.Validate(); err == nil {
			t.Errorf("%+v: want an error", s)
		}
	}
	ok := netns.Spec{Run: "x"}
	ok.Normalize()
	if err := ok.Validate(); err != nil {
		t.Errorf("normalized zero spec: %v", err)
	}
}

// TestIPNetnsAddDoesNotShadow: once spanperf has made a namespace, iproute2's
// `ip netns add` finds its directory already a mount point and does not
// stack a mount over it, so spanperf's namespaces stay deletable.
func TestIPNetnsAddDoesNotShadow(t *testing.T) {
	tb := newTestbed(t, netns.Spec{})
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip (Debian package iproute2)")
	}
	name := "spanperf-test-iproute2"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	exec.Command("ip", "netns", "del", name).Run()
	if err := tb.Close(); err != nil {
		t.Fatalf("close after ip netns add: %v", err)
	}
	assertNoResidue(t, tb.Spec().Run)
}
