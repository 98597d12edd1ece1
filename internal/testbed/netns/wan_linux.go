package netns

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/wanemu"
)

// WAN emulators, as ShapeWAN takes them and manifests record them.
const (
	EmulatorNetem     = "netem"
	EmulatorUserspace = "userspace"
)

// WANShape is what the links between sites do to packets, beyond the
// testbed's MTU and rate: delay, jitter, loss (and a rate of its own) per
// ordered pair of sites (by index, from → to). A pair it leaves out passes
// packets unchanged.
type WANShape map[[2]int]wanemu.LinkSpec

// Uniform tells whether every pair toward one site has the same spec: all
// netem can express, with one qdisc on each site's link.
func (w WANShape) uniform(sites int) bool {
	for to := range sites {
		var first *wanemu.LinkSpec
		for from := range sites {
			if from == to {
				continue
			}
			l := w[[2]int{from, to}]
			if first == nil {
				first = &l
			} else if *first != l {
				return false
			}
		}
	}
	return true
}

// ErrNoNetem is returned (wrapped) when the kernel lacks netem.
var ErrNoNetem = errors.New("this kernel has no netem (sch_netem)")

// NetemSupported returns nil when a netem qdisc can be made here, and an
// error wrapping ErrNoNetem (with the kernel's answer) when it cannot.
func NetemSupported() error {
	return Scratch(func(h *netlink.Handle) error {
		d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "spnetem0"}, PeerName: "spnetem1"}
		if err := h.LinkAdd(d); err != nil {
			return fmt.Errorf("netem preflight: veth: %w", err)
		}
		l, err := h.LinkByName("spnetem0")
		if err != nil {
			return fmt.Errorf("netem preflight: %w", err)
		}
		q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			netlink.NetemQdiscAttrs{Latency: 1000})
		if err := h.QdiscAdd(q); err != nil {
			return fmt.Errorf("%w: adding a netem qdisc: %v", ErrNoNetem, err)
		}
		return nil
	})
}

// ChooseEmulator resolves an emulator choice (auto, netem, userspace; ""
// is auto) for shapes over sites: auto takes netem when the kernel has it
// and uniform holds (per-pair links need the userspace emulator), else
// userspace. netem on a kernel without it is an error saying why.
func ChooseEmulator(choice string, perPair bool) (string, error) {
	switch choice {
	case EmulatorUserspace:
		return EmulatorUserspace, nil
	case EmulatorNetem:
		if perPair {
			return "", errors.New("wan emulator netem: per-pair links need the userspace emulator (netem shapes each site's link as a whole)")
		}
		if err := NetemSupported(); err != nil {
			return "", fmt.Errorf("wan emulator netem: %w", err)
		}
		return EmulatorNetem, nil
	case "", "auto":
		if !perPair && NetemSupported() == nil {
			return EmulatorNetem, nil
		}
		return EmulatorUserspace, nil
	}
	return "", fmt.Errorf("wan emulator %q: want auto, netem or userspace", choice)
}

// wanState is the emulation in effect.
type wanState struct {
	mu       sync.Mutex
	emulator string
	shape    WANShape
	proc     testbed.Process
}

// ShapeWAN makes the links between sites behave as shape says, with
// emulator (EmulatorNetem or EmulatorUserspace), replacing what an earlier
// call set; an empty shape removes the emulation. The userspace emulator
// is `spanperf agent wanemu` in the wan namespace, started by cmd(args...)
// (agent.Command with "wanemu" prepended). A call with the shape in effect
// changes nothing. Close removes the emulation.
func (tb *Testbed) ShapeWAN(ctx context.Context, emulator string, shape WANShape, cmd func(args ...string) testbed.Command) error {
	w := &tb.wanState
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.emulator == emulator && maps.Equal(w.shape, shape) {
		return nil
	}
	if err := tb.unshapeLocked(); err != nil {
		return err
	}
	if len(shape) == 0 {
		return nil
	}
	for k, l := range shape {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("wan %s→%s: %w", SiteName(k[0]), SiteName(k[1]), err)
		}
	}
	var err error
	switch emulator {
	case EmulatorNetem:
		err = tb.netem(shape)
	case EmulatorUserspace:
		err = tb.startEmulator(ctx, shape, cmd)
	default:
		err = fmt.Errorf("wan emulator %q: want %s or %s", emulator, EmulatorNetem, EmulatorUserspace)
	}
	if err != nil {
		return errors.Join(err, tb.unshapeLocked())
	}
	w.emulator, w.shape = emulator, maps.Clone(shape)
	return nil
}

// netem puts a netem qdisc on the wan router's link to each site, with the
// spec of the packets toward it (uniform holds), under the testbed's tbf
// when it has one.
func (tb *Testbed) netem(shape WANShape) error {
	if !shape.uniform(len(tb.sites)) {
		return errors.New("wan emulator netem: the links toward one site differ: use the userspace emulator")
	}
	for to, s := range tb.sites {
		from := (to + 1) % len(tb.sites)
		l, ok := shape[[2]int{from, to}]
		if !ok || l == (wanemu.LinkSpec{}) {
			continue
		}
		link, err := tb.wan.nl.LinkByName("to-" + s.name)
		if err != nil {
			return fmt.Errorf("wan link to %s: %w", s.name, err)
		}
		parent := uint32(netlink.HANDLE_ROOT)
		if tb.spec.RateBPS > 0 {
			parent = netlink.MakeHandle(1, 0) // tbf's single class
		}
		attrs := netlink.NetemQdiscAttrs{Latency: uint32(l.Delay.Microseconds()), Jitter: uint32(l.Jitter.Microseconds()),
			Loss: float32(l.Loss * 100), Limit: 100000, Rate64: uint64(l.RateBPS / 8)}
		q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(10, 0), Parent: parent}, attrs)
		if err := tb.wan.nl.QdiscAdd(q); err != nil {
			return fmt.Errorf("netem on the link to %s: %w", s.name, err)
		}
	}
	return nil
}

// prefixesOf are the addresses site i's packets carry: its underlay and,
// in the gateway topology, its node's subnet.
func (tb *Testbed) prefixesOf(i int) []netip.Prefix {
	ps := []netip.Prefix{UnderlayPrefix(i).Masked()}
	if tb.spec.Topology == testbed.TopologyGateway {
		ps = append(ps, NodePrefix(i))
	}
	return ps
}

// startEmulator starts the userspace emulator in the wan namespace with a
// route per ordered pair of shape and waits for its ready line.
func (tb *Testbed) startEmulator(ctx context.Context, shape WANShape, cmd func(args ...string) testbed.Command) error {
	if cmd == nil {
		return errors.New("wan emulator userspace: no command to start it")
	}
	args := []string{"wanemu"}
	for _, k := range slices.SortedFunc(maps.Keys(shape), func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	}) {
		for _, from := range tb.prefixesOf(k[0]) {
			for _, to := range tb.prefixesOf(k[1]) {
				args = append(args, "--route", wanemu.FormatRoute(wanemu.Route{From: from, To: to, Link: shape[k]}))
			}
		}
	}
	c := cmd(args...)
	c.Name = "wan-emulator"
	out := &testbed.SyncBuffer{}
	c.Stdout = out
	p, err := tb.wan.Exec(ctx, c)
	if err != nil {
		return fmt.Errorf("wan emulator: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `"ready":true`) {
		select {
		case <-p.Done():
			return fmt.Errorf("wan emulator: exited: %v: %s", p.Wait(), p.Tail())
		case <-ctx.Done():
			p.Stop(time.Second)
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop(time.Second)
			return fmt.Errorf("wan emulator: not ready after 10s: %s", p.Tail())
		}
	}
	tb.wanState.proc = p
	return nil
}

// unshapeLocked removes the emulation in effect (w.mu held).
func (tb *Testbed) unshapeLocked() error {
	w := &tb.wanState
	var errs []error
	switch w.emulator {
	case EmulatorUserspace:
		if w.proc != nil {
			w.proc.Stop(5 * time.Second)
			w.proc = nil
		}
	case EmulatorNetem:
		for _, s := range tb.sites {
			link, err := tb.wan.nl.LinkByName("to-" + s.name)
			if err != nil {
				continue
			}
			qs, _ := tb.wan.nl.QdiscList(link)
			for _, q := range qs {
				if q.Type() == "netem" {
					if err := tb.wan.nl.QdiscDel(q); err != nil {
						errs = append(errs, fmt.Errorf("remove netem on the link to %s: %w", s.name, err))
					}
				}
			}
		}
	}
	w.emulator, w.shape = "", nil
	return errors.Join(errs...)
}

// WANEmulator is the emulator in effect ("" for none).
func (tb *Testbed) WANEmulator() string {
	tb.wanState.mu.Lock()
	defer tb.wanState.mu.Unlock()
	return tb.wanState.emulator
}
