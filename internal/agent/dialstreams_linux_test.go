package agent

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDialStreamsCongestion: the connections carry the congestion control
// asked (read back with getsockopt), all n of them are open, and a name
// the kernel lacks is an error that lists what it has.
func TestDialStreamsCongestion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	target := netip.MustParseAddrPort(ln.Addr().String())
	conns, err := dialStreams(target, 100, "reno")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	if len(conns) != 100 {
		t.Fatalf("%d connections, want 100", len(conns))
	}
	for i, c := range conns {
		got, err := unix.GetsockoptString(c.fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		if err != nil || strings.TrimRight(got, "\x00") != "reno" {
			t.Fatalf("connection %d: congestion %q (%v), want reno", i, got, err)
		}
	}
	if _, err := dialStreams(target, 3, "no-such-cc"); err == nil || !strings.Contains(err.Error(), "this kernel has:") {
		t.Errorf("unknown congestion control: error %v, want one listing the kernel's", err)
	}
}
