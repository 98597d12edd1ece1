package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// TestRelayLoopback: bytes sent through the relay reach the server, the
// server's answer comes back, and a half-close travels both ways (the
// server sees EOF after the client's CloseWrite and still answers). The
// relay returns once its context ends.
func TestRelayLoopback(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The server reads everything until EOF, then sends it back (an echo
	// that needs the client's half-close to come through).
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write(b)
			}()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Relay(ctx, RelaySpec{Listen: "127.0.0.1:0", To: srv.Addr().String()}, func(a net.Addr) { addrc <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("relay not listening after 5s")
	}
	for i := range 3 {
		msg := make([]byte, 1<<20+i)
		rand.Read(msg)
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			c.Write(msg)
			c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("connection %d: got %d bytes back, want the %d sent", i, len(got), len(msg))
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("relay ended with %v, want nil after its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("relay did not return within 5s of its context ending")
	}
}

// TestRelayBadInput: the flags are checked before anything listens.
func TestRelayBadInput(t *testing.T) {
	var e bytes.Buffer
	if code := Main([]string{"relay", "--listen", ":0", "--to", "nohostport"}, io.Discard, &e); code != 2 || !bytes.Contains(e.Bytes(), []byte(`--to "nohostport"`)) {
		t.Errorf("exit %d, %q; want 2 naming --to", code, e.String())
	}
}
