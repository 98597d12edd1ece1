package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RelaySpec is a plain userspace TCP forwarder: every connection accepted
// on Listen is joined to a new connection to To, and bytes are copied both
// ways by one goroutine per direction. It is a component that tests can
// put on a datapath and size: all its work is userspace CPU.
type RelaySpec struct {
	// Listen is the address to accept on (":7200", "127.0.0.1:0").
	Listen string
	// To is the HOST:PORT every connection is forwarded to.
	To string
	// DialTimeout bounds each dial of To; 0 is 10s.
	DialTimeout time.Duration
	// HoldBytes, when > 0, is memory the relay allocates and touches for
	// every connection it accepts, and keeps until the connection closes:
	// a known cost per connection, for known-answer tests.
	HoldBytes int
	// Backup, when set, is a second upstream: SwitchAfter after the first
	// dial of To that fails, every new connection goes to Backup instead
	// (a switch-over with a known delay; connections accepted meanwhile
	// are closed when their dial of To fails).
	Backup string
	// SwitchAfter is how long after the first failed dial of To the relay
	// switches to Backup.
	SwitchAfter time.Duration
}

// Validate checks that both addresses are given.
func (s RelaySpec) Validate() error {
	if s.Listen == "" {
		return errors.New("relay: --listen is empty")
	}
	if _, _, err := net.SplitHostPort(s.To); err != nil {
		return fmt.Errorf("relay: --to %q: %w", s.To, err)
	}
	if s.HoldBytes < 0 {
		return fmt.Errorf("relay: --hold-bytes must be ≥ 0, got %d", s.HoldBytes)
	}
	if s.Backup != "" {
		if _, _, err := net.SplitHostPort(s.Backup); err != nil {
			return fmt.Errorf("relay: --backup %q: %w", s.Backup, err)
		}
	}
	if s.SwitchAfter < 0 || s.SwitchAfter > 0 && s.Backup == "" {
		return fmt.Errorf("relay: --switch-after %v: wants a --backup and a duration ≥ 0", s.SwitchAfter)
	}
	return nil
}

// upstream picks where relayed connections go: To, until SwitchAfter
// after the first failed dial of it, then Backup.
type upstream struct {
	spec     RelaySpec
	mu       sync.Mutex
	switchAt time.Time // zero until a dial of To failed
}

// pick returns the address a new connection dials now.
func (u *upstream) pick() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.spec.Backup != "" && !u.switchAt.IsZero() && !time.Now().Before(u.switchAt) {
		return u.spec.Backup
	}
	return u.spec.To
}

// failed notes a failed dial of addr.
func (u *upstream) failed(addr string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if addr == u.spec.To && u.spec.Backup != "" && u.switchAt.IsZero() {
		u.switchAt = time.Now().Add(u.spec.SwitchAfter)
	}
}

// Relay forwards connections as spec says until ctx ends; ready, if not
// nil, gets the address it listens on once it accepts. It returns nil when
// ctx ended it. Connections in flight are closed when it returns.
func Relay(ctx context.Context, spec RelaySpec, ready func(addr net.Addr)) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.DialTimeout <= 0 {
		spec.DialTimeout = 10 * time.Second
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", spec.Listen)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	up := &upstream{spec: spec}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("relay: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			relayConn(ctx, c, spec, up)
		}()
	}
}

// relayConn joins c to a new connection to the upstream u picks until
// both directions have ended (each half-closes the other side's write
// end) or ctx ends.
func relayConn(ctx context.Context, c net.Conn, spec RelaySpec, u *upstream) {
	defer c.Close()
	held := touched(spec.HoldBytes)
	defer runtime.KeepAlive(held)
	dctx, cancel := context.WithTimeout(ctx, spec.DialTimeout)
	to := u.pick()
	up, err := (&net.Dialer{}).DialContext(dctx, "tcp", to)
	cancel()
	if err != nil {
		u.failed(to)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
}

// touched allocates n bytes and writes to every page of them, so that
// they are resident.
func touched(n int) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	page := os.Getpagesize()
	for i := 0; i < n; i += page {
		b[i] = 1
	}
	b[n-1] = 1
	return b
}

// relayMain runs `agent relay --listen ADDR --to HOST:PORT [--backup
// HOST:PORT --switch-after D]` until SIGTERM or SIGINT.
func relayMain(args []string, stderr io.Writer) int {
	var s RelaySpec
	fs := flag.NewFlagSet("agent relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.Listen, "listen", "", "address to accept connections on (\":7200\")")
	fs.StringVar(&s.To, "to", "", "HOST:PORT to forward every connection to")
	fs.IntVar(&s.HoldBytes, "hold-bytes", 0, "bytes to allocate, touch and keep for every connection until it closes (a known cost per connection)")
	fs.StringVar(&s.Backup, "backup", "", "HOST:PORT to forward to once a dial of --to failed, after --switch-after")
	fs.DurationVar(&s.SwitchAfter, "switch-after", 0, "how long after the first failed dial of --to the relay switches to --backup")
	if fs.Parse(args) != nil {
		return 2
	}
	if err := s.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	// Two descriptors per connection (more while splicing): as many as
	// the hard limit allows.
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := Relay(ctx, s, func(a net.Addr) { fmt.Fprintf(stderr, "relay: %s -> %s\n", a, s.To) })
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
