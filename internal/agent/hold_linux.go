package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/results"
)

// HoldSpec says what `agent hold` does: open Count TCP connections to
// Target through the datapath at ConnectRate, hold them, each answering a
// keepalive every Keepalive, until told to let go, then close them.
type HoldSpec struct {
	// Target is the server (`agent hold-serve`) as reachable from the
	// client's site.
	Target netip.AddrPort
	// Count is how many connections to open.
	Count int
	// ConnectRate is how many connection attempts start per second; 0
	// starts them as fast as InFlight allows.
	ConnectRate float64
	// InFlight bounds the attempts under way at once; 0 means 256.
	InFlight int
	// Keepalive is the time between a held connection's exchanges (8 bytes
	// each way); 0 means 5 s.
	Keepalive time.Duration
	// MaxHold bounds how long the connections are held when nobody lets
	// them go; 0 means 10 min.
	MaxHold time.Duration
}

// Bounds of a hold.
const (
	// MaxKeepalivesPerS is the most keepalive exchanges per second a hold
	// may ask for (Count / Keepalive): they load the path under test.
	MaxKeepalivesPerS = 10000
	// holdTimeout bounds each connect and each keepalive exchange.
	holdTimeout = 10 * time.Second
	// holdMsg is the size of a keepalive, each way.
	holdMsg = 8
	// fdSlack is the descriptors a hold needs beside its connections.
	fdSlack = 64
	// portRangeLo and portRangeHi are the widest ephemeral port range a
	// hold sets in its namespace.
	portRangeLo, portRangeHi = 1024, 65535
)

// Normalize fills in the defaults.
func (s *HoldSpec) Normalize() {
	if s.InFlight <= 0 {
		s.InFlight = 256
	}
	if s.Keepalive <= 0 {
		s.Keepalive = 5 * time.Second
	}
	if s.MaxHold <= 0 {
		s.MaxHold = 10 * time.Minute
	}
}

// Validate reports a spec a hold cannot run.
func (s HoldSpec) Validate() error {
	switch {
	case !s.Target.IsValid():
		return errors.New("hold: no target")
	case s.Count < 1:
		return fmt.Errorf("hold: count must be ≥ 1, got %d", s.Count)
	case !(s.ConnectRate >= 0):
		return fmt.Errorf("hold: connect rate must be ≥ 0, got %g", s.ConnectRate)
	case float64(s.Count)/s.Keepalive.Seconds() > MaxKeepalivesPerS:
		return fmt.Errorf("hold: %d connections with a keepalive every %v make %.0f exchanges/s, above the %d/s a hold allows: raise keepalive",
			s.Count, s.Keepalive, float64(s.Count)/s.Keepalive.Seconds(), MaxKeepalivesPerS)
	}
	return nil
}

// HoldOpened is the line `agent hold` prints once its connections are
// open (or failed): how many are open, how many failed (and the first
// failure), and how long opening took.
type HoldOpened struct {
	Open           int     `json:"open"`
	Failures       int     `json:"failures"`
	FirstError     string  `json:"first_error,omitempty"`
	ConnectSeconds float64 `json:"connect_s"`
}

// Hold opens spec.Count connections, writes a HoldOpened line to opened,
// holds them until release is closed or spec.MaxHold passes, closes them
// (with a reset, so that no TIME_WAIT is left to hold their ports) and
// returns the trial's metrics (results.OpenConnections and the other
// connection metrics). The limits it needs are raised first
// (PrepareConnections); one that still binds is the error. It fails when
// no connection opened.
func Hold(spec HoldSpec, opened io.Writer, release <-chan struct{}) (*Result, error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := PrepareConnections(spec.Count); err != nil {
		return nil, err
	}
	ports, _ := portRange("/proc/sys/net/ipv4/ip_local_port_range")
	cpu0 := cpuSeconds()
	h := &holder{spec: spec, stop: make(chan struct{}), lat: hdrhistogram.New(1, int64(time.Minute), 3)}
	open := h.open()
	if err := json.NewEncoder(opened).Encode(open); err != nil {
		h.close()
		return nil, err
	}
	if open.Open == 0 {
		h.close()
		return nil, fmt.Errorf("hold: none of %d connections to %s opened; the first failure: %s", spec.Count, spec.Target, open.FirstError)
	}
	t0 := time.Now()
	select {
	case <-release:
	case <-time.After(spec.MaxHold):
	}
	held := time.Since(t0)
	h.close()
	m := map[string]float64{
		results.OpenConnections:   float64(open.Open),
		results.ConnectFailures:   float64(open.Failures),
		results.Keepalives:        float64(h.keepalives.Load()),
		results.KeepaliveFailures: float64(h.dropped.Load()),
		results.EphemeralPorts:    float64(ports),
		"held_s":                  held.Seconds(),
		"cpu_seconds_client":      cpuSeconds() - cpu0,
	}
	if open.ConnectSeconds > 0 {
		m[results.ConnectRatePerS] = float64(open.Open) / open.ConnectSeconds
	}
	m[results.ConnectLatencyP50] = float64(h.lat.ValueAtQuantile(50)) / 1e9
	m[results.ConnectLatencyP99] = float64(h.lat.ValueAtQuantile(99)) / 1e9
	return &Result{Metrics: m}, nil
}

// holder is one hold's connections.
type holder struct {
	spec HoldSpec
	// stop is closed when the connections are let go.
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	conns    []*net.TCPConn
	lat      *hdrhistogram.Histogram
	failures int
	firstErr string
	lastOpen time.Time

	keepalives, dropped atomic.Int64
}

// open starts the connection attempts at the spec's rate, at most
// InFlight at once, and waits until each has opened (connected and
// answered its first keepalive) or failed.
func (h *holder) open() HoldOpened {
	s := h.spec
	sem := make(chan struct{}, s.InFlight)
	var opening sync.WaitGroup
	start := time.Now()
	for i := range s.Count {
		if s.ConnectRate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / s.ConnectRate * float64(time.Second)))))
		}
		sem <- struct{}{}
		opening.Add(1)
		go h.openOne(func() {
			<-sem
			opening.Done()
		})
	}
	opening.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := HoldOpened{Open: len(h.conns), Failures: h.failures, FirstError: h.firstErr}
	if len(h.conns) > 0 {
		out.ConnectSeconds = h.lastOpen.Sub(start).Seconds()
	}
	return out
}

// openOne opens one connection, calls opened once it is open or has
// failed, and keeps it alive until the hold ends.
func (h *holder) openOne(opened func()) {
	fail := func(err error) {
		h.mu.Lock()
		if h.failures++; h.firstErr == "" {
			h.firstErr = err.Error()
		}
		h.mu.Unlock()
		opened()
	}
	t0 := time.Now()
	c, err := net.DialTimeout("tcp", h.spec.Target.String(), holdTimeout)
	if err != nil {
		fail(err)
		return
	}
	tc := c.(*net.TCPConn)
	msg := make([]byte, holdMsg)
	if err := exchange(tc, msg); err != nil {
		tc.Close()
		fail(fmt.Errorf("first keepalive: %w", err))
		return
	}
	now := time.Now()
	h.mu.Lock()
	h.conns = append(h.conns, tc)
	h.lat.RecordValue(int64(now.Sub(t0)))
	if now.After(h.lastOpen) {
		h.lastOpen = now
	}
	h.wg.Add(1)
	h.mu.Unlock()
	opened()
	defer h.wg.Done()
	// Each connection's keepalives start at a random phase, so that they
	// spread evenly over the interval.
	t := time.NewTimer(time.Duration(rand.Int64N(int64(h.spec.Keepalive))))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if err := exchange(tc, msg); err != nil {
			select {
			case <-h.stop:
			default:
				h.dropped.Add(1)
			}
			return
		}
		h.keepalives.Add(1)
		t.Reset(h.spec.Keepalive)
	}
}

// exchange sends msg and reads the server's echo of it.
func exchange(c *net.TCPConn, msg []byte) error {
	c.SetDeadline(time.Now().Add(holdTimeout))
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err := io.ReadFull(c, msg)
	return err
}

// close lets every connection go, each with a reset.
func (h *holder) close() {
	close(h.stop)
	h.mu.Lock()
	for _, c := range h.conns {
		c.SetLinger(0)
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// PrepareConnections raises what bounds n connections from (or to) this
// process in its network namespace: RLIMIT_NOFILE's soft limit (up to the
// hard limit, which only CAP_SYS_RESOURCE may raise) and the namespace's
// ephemeral port range (net.ipv4.ip_local_port_range, per network
// namespace: widened to 1024–65535 when narrower than n). A limit that
// still binds is the error, naming it: the hard descriptor limit, the
// widest port range (n connections to one address and port need n ports)
// and the kernel's connection tracking table (nf_conntrack_max).
func PrepareConnections(n int) error {
	if err := RaiseNofile(n + fdSlack); err != nil {
		return err
	}
	if err := widenPortRange("/proc/sys/net/ipv4/ip_local_port_range", n); err != nil {
		return err
	}
	if max, err := readInt("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil && max > 0 && n > max {
		return fmt.Errorf("nf_conntrack_max is %d, below the %d connections asked for (connection tracking would drop the rest)", max, n)
	}
	return nil
}

// RaiseNofile raises this process's soft RLIMIT_NOFILE to at least need
// descriptors, or fails naming the hard limit when it is lower.
func RaiseNofile(need int) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= uint64(need) {
		return nil
	}
	if lim.Max < uint64(need) {
		return fmt.Errorf("RLIMIT_NOFILE: %d descriptors needed, the hard limit is %d (raising it needs CAP_SYS_RESOURCE)", need, lim.Max)
	}
	lim.Cur = uint64(need)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: raise to %d: %w", need, err)
	}
	return nil
}

// widenPortRange makes the ephemeral port range in file (this network
// namespace's net.ipv4.ip_local_port_range) span at least n ports.
func widenPortRange(file string, n int) error {
	lo, hi, err := readPortRange(file)
	if err != nil {
		return err
	}
	if hi-lo+1 >= n {
		return nil
	}
	if widest := portRangeHi - portRangeLo + 1; n > widest {
		return fmt.Errorf("net.ipv4.ip_local_port_range: %d connections to one address and port need %d ports; at most %d (%d–%d) can be set", n, n, widest, portRangeLo, portRangeHi)
	}
	if err := os.WriteFile(file, []byte(fmt.Sprintf("%d %d", portRangeLo, portRangeHi)), 0o644); err != nil {
		return fmt.Errorf("net.ipv4.ip_local_port_range: %d ports (%d–%d) for %d connections; widen: %w", hi-lo+1, lo, hi, n, err)
	}
	return nil
}

// readPortRange reads an ephemeral port range (net.ipv4.ip_local_port_range).
func readPortRange(file string) (lo, hi int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, fmt.Errorf("net.ipv4.ip_local_port_range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("net.ipv4.ip_local_port_range: %q", b)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("net.ipv4.ip_local_port_range: %w", err)
	}
	return lo, hi, nil
}

// portRange is how many ports an ephemeral port range spans.
func portRange(file string) (int, error) {
	lo, hi, err := readPortRange(file)
	return hi - lo + 1, err
}

func readInt(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// HoldServe listens on addr and echoes every connection's keepalives
// until the process is stopped; it prints a Ready line once it listens.
// It first raises the limits of count connections (PrepareConnections).
// Each connection is a goroutine blocked in the runtime's poller, not a
// thread, so tens of thousands can be held.
func HoldServe(addr string, count int, stdout io.Writer) error {
	if err := PrepareConnections(count); err != nil {
		return fmt.Errorf("agent hold-serve: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent hold-serve: %w", err)
	}
	defer ln.Close()
	if err := json.NewEncoder(stdout).Encode(Ready{Ready: true, Addr: ln.Addr().String()}); err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
				// Out of descriptors: the client counts what failed.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("agent hold-serve: %w", err)
		}
		go func() {
			defer c.Close()
			var buf [64]byte
			for {
				n, err := c.Read(buf[:])
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// holdMain runs `agent hold` and `agent hold-serve`.
func holdMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if args[0] == "hold-serve" {
		fs := flag.NewFlagSet("agent hold-serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", ":"+strconv.Itoa(DefaultPort), "address to listen on")
		count := fs.Int("count", 1, "connections to make room for (descriptors, ports)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if err := HoldServe(*listen, *count, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	var s HoldSpec
	var target string
	fs := flag.NewFlagSet("agent hold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&target, "target", "", "server HOST:PORT (`agent hold-serve`)")
	fs.IntVar(&s.Count, "count", 0, "connections to open and hold")
	fs.Float64Var(&s.ConnectRate, "connect-rate", 0, "connection attempts started per second (0: as fast as --in-flight allows)")
	fs.IntVar(&s.InFlight, "in-flight", 256, "connection attempts under way at once")
	fs.DurationVar(&s.Keepalive, "keepalive", 5*time.Second, "time between each connection's keepalive exchanges (8 bytes each way)")
	fs.DurationVar(&s.MaxHold, "max-hold", 10*time.Minute, "let the connections go after this long if standard input has not closed")
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	fail := func(err error) int {
		json.NewEncoder(stdout).Encode(&Result{Error: err.Error()})
		fmt.Fprintln(stderr, err)
		return 1
	}
	var err error
	if s.Target, err = ResolveTarget(context.Background(), target); err != nil {
		return fail(fmt.Errorf("agent hold: --target: %w", err))
	}
	// Standard input closing lets the connections go.
	release := make(chan struct{})
	go func() {
		io.Copy(io.Discard, bufio.NewReader(stdin))
		close(release)
	}()
	res, err := Hold(s, stdout, release)
	if err != nil {
		return fail(err)
	}
	json.NewEncoder(stdout).Encode(res)
	return 0
}
