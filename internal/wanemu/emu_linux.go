package wanemu

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Spec is an emulator: the TUN device it makes in the current network
// namespace and what it does to the packets routed through it.
type Spec struct {
	// Dev names the TUN device; "" means DefaultDev.
	Dev string
	// Table is the routing table whose default route is the TUN device;
	// 0 means DefaultTable.
	Table int
	// Routes say which link applies to which packets; the first match
	// wins. Each route is its own link (own bottleneck, own random
	// source), so give each direction of each pair its route.
	Routes []Route
	// Ifaces are the links whose incoming packets are sent through the
	// emulator; nil means every link of the namespace but lo and Dev.
	Ifaces []string
	// SpinBelow is how close to a packet's release time the scheduler
	// stops sleeping and polls the clock, trading CPU for timing
	// precision; 0 means DefaultSpin, < 0 never spins.
	SpinBelow time.Duration
	// Seed seeds the links' random sources (loss, jitter); 0 picks one.
	Seed uint64
}

// Defaults of Spec.
const (
	DefaultDev   = "spwan0"
	DefaultTable = 7100
	DefaultSpin  = 50 * time.Microsecond
)

// Normalize fills the defaults.
func (s *Spec) Normalize() {
	if s.Dev == "" {
		s.Dev = DefaultDev
	}
	if s.Table == 0 {
		s.Table = DefaultTable
	}
	if s.SpinBelow == 0 {
		s.SpinBelow = DefaultSpin
	}
	if s.Seed == 0 {
		s.Seed = rand.Uint64()
	}
	for i := range s.Routes {
		s.Routes[i].Link.Normalize()
	}
}

// Validate reports a spec the emulator cannot run.
func (s Spec) Validate() error {
	if len(s.Dev) > 15 || s.Dev == "" {
		return fmt.Errorf("dev %q: want 1 to 15 characters", s.Dev)
	}
	for i, r := range s.Routes {
		if !r.From.IsValid() || !r.To.IsValid() {
			return fmt.Errorf("route %d: from and to must be prefixes", i+1)
		}
		if err := r.Link.Validate(); err != nil {
			return fmt.Errorf("route %d (%s -> %s): %w", i+1, r.From, r.To, err)
		}
	}
	return nil
}

// lossy tells whether any link drops packets at random: then the device
// carries wire-size packets, so that loss applies to each.
func (s Spec) lossy() bool {
	return slices.ContainsFunc(s.Routes, func(r Route) bool { return r.Link.Loss > 0 })
}

// Stats counts what the emulator did. Lateness is how long after its
// release time each packet was written back: the emulator's own delay
// error.
type Stats struct {
	// PacketsIn and PacketsOut count packets read and written back (a GSO
	// packet counts once); BytesIn counts their IP bytes.
	PacketsIn  uint64 `json:"packets_in"`
	PacketsOut uint64 `json:"packets_out"`
	BytesIn    uint64 `json:"bytes_in"`
	// Lost are dropped by the links' loss; QueueDrops by a full backlog.
	Lost       uint64 `json:"lost"`
	QueueDrops uint64 `json:"queue_drops"`
	// WriteErrors are packets the device refused back.
	WriteErrors uint64 `json:"write_errors"`
	// Unmatched packets matched no route and passed undelayed.
	Unmatched uint64 `json:"unmatched"`
	// Offload tells whether the device carried GSO packets.
	Offload bool `json:"offload"`
	// Lateness percentiles, in microseconds, over the last LatenessSamples
	// packets written back.
	LatenessP50us   float64 `json:"lateness_p50_us"`
	LatenessP99us   float64 `json:"lateness_p99_us"`
	LatenessMaxus   float64 `json:"lateness_max_us"`
	LatenessSamples int     `json:"lateness_samples"`
}

// Emulator is a running emulator. Close stops it and removes what it set up.
type Emulator struct {
	spec  Spec
	tun   *os.File
	links []*link
	nl    *netlink.Handle
	rules []*netlink.Rule

	mu  sync.Mutex
	q   pktHeap
	seq uint64
	// wake is an eventfd the reader (and Close) write to when the next
	// release time moves earlier, waking the writer from its sleep.
	wake    int
	stats   Stats
	late    []float32 // lateness samples, µs, a ring
	lateAt  int
	held    int64
	closing chan struct{}
	done    sync.WaitGroup
	runErr  error
}

// maxHeld bounds the bytes the emulator holds at once, whatever the links
// say: beyond it packets are dropped as queue drops.
const maxHeld = 512 << 20

// lateRing is how many lateness samples are kept.
const lateRing = 1 << 17

// vnetHdrLen is the size of struct virtio_net_hdr before each packet.
const vnetHdrLen = 10

// New makes the TUN device and the policy routing that sends the
// namespace's forwarded packets through it, and starts the emulator. It
// must be called in the namespace to emulate in (a locked OS thread there,
// or a process started in it).
func New(spec Spec) (_ *Emulator, err error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("wan emulator: %w", err)
	}
	e := &Emulator{spec: spec, wake: -1, closing: make(chan struct{}), late: make([]float32, 0, lateRing)}
	for i, r := range spec.Routes {
		e.links = append(e.links, &link{spec: r.Link, rng: newRand(spec.Seed + uint64(i))})
	}
	defer func() {
		if err != nil {
			e.teardown()
			if e.wake >= 0 {
				unix.Close(e.wake)
			}
		}
	}()
	if e.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("wan emulator: eventfd: %w", err)
	}
	e.stats.Offload = !spec.lossy()
	if e.tun, err = openTUN(spec.Dev, e.stats.Offload); err != nil {
		return nil, fmt.Errorf("wan emulator: %w", err)
	}
	if err = e.route(); err != nil {
		return nil, fmt.Errorf("wan emulator: %w", err)
	}
	e.done.Add(2)
	go e.read()
	go e.write()
	return e, nil
}

// openTUN makes TUN device dev (IPv4/IPv6, no packet info, virtio-net
// headers) and, with offload, lets it carry checksum-offloaded TSO packets.
func openTUN(dev string, offload bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: %w", dev, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: TUNSETIFF: %w", dev, err)
	}
	if offload {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("tun %s: TUNSETOFFLOAD: %w", dev, err)
		}
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+dev), nil
}

// tunMTU is the TUN device's MTU: the largest IP packet, so that only the
// sites' own links bound the packets' size.
const tunMTU = 65535

// route brings the device up, makes it the default route of the table, and
// adds a rule per incoming link that looks the table up.
func (e *Emulator) route() error {
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	e.nl = nl
	tun, err := nl.LinkByName(e.spec.Dev)
	if err != nil {
		return fmt.Errorf("tun %s: %w", e.spec.Dev, err)
	}
	if err := nl.LinkSetTxQLen(tun, 10000); err != nil {
		return fmt.Errorf("tun %s: txqueuelen: %w", e.spec.Dev, err)
	}
	// The device is no link of its own: at its default 1500 a testbed with
	// MTU 9000 had its large packets fragmented on the way in, or dropped
	// when they forbid it (Open vSwitch's tunnels carried nothing).
	if err := nl.LinkSetMTU(tun, tunMTU); err != nil {
		return fmt.Errorf("tun %s: mtu %d: %w", e.spec.Dev, tunMTU, err)
	}
	if err := nl.LinkSetUp(tun); err != nil {
		return fmt.Errorf("tun %s up: %w", e.spec.Dev, err)
	}
	// The packets written back carry the sites' source addresses, whose
	// route is not the TUN device: strict reverse-path filtering would drop them.
	for _, k := range []string{"all", e.spec.Dev} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+k+"/rp_filter", []byte("0"), 0); err != nil {
			return fmt.Errorf("rp_filter %s: %w", k, err)
		}
	}
	for _, dst := range []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}} {
		r := &netlink.Route{LinkIndex: tun.Attrs().Index, Dst: dst, Table: e.spec.Table, Scope: netlink.SCOPE_LINK}
		if err := nl.RouteReplace(r); err != nil && dst.IP.To4() != nil {
			return fmt.Errorf("route default dev %s table %d: %w", e.spec.Dev, e.spec.Table, err)
		}
	}
	ifaces := e.spec.Ifaces
	if ifaces == nil {
		links, err := nl.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if n := l.Attrs().Name; n != "lo" && n != e.spec.Dev {
				ifaces = append(ifaces, n)
			}
		}
	}
	if len(ifaces) == 0 {
		return errors.New("no links to emulate: the namespace has none but lo")
	}
	for _, name := range ifaces {
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			r := netlink.NewRule()
			r.IifName, r.Table, r.Priority, r.Family = name, e.spec.Table, 100, fam
			if err := nl.RuleAdd(r); err != nil {
				return fmt.Errorf("rule iif %s lookup %d: %w", name, e.spec.Table, err)
			}
			e.rules = append(e.rules, r)
		}
	}
	return nil
}

// teardown removes the rules, the table's routes (with the device) and
// the device.
func (e *Emulator) teardown() error {
	var errs []error
	if e.nl != nil {
		for _, r := range e.rules {
			if err := e.nl.RuleDel(r); err != nil {
				errs = append(errs, fmt.Errorf("delete rule iif %s: %w", r.IifName, err))
			}
		}
		e.nl.Close()
	}
	if e.tun != nil {
		errs = append(errs, e.tun.Close())
	}
	return errors.Join(errs...)
}

// Close stops the emulator (packets it holds are dropped) and removes the
// device and the rules; after it, the namespace routes as before.
func (e *Emulator) Close() error {
	select {
	case <-e.closing:
		return nil
	default:
	}
	close(e.closing)
	e.signal()
	err := e.teardown()
	e.done.Wait()
	unix.Close(e.wake)
	return errors.Join(err, e.runErr)
}

// Stats returns the counters so far.
func (e *Emulator) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	if n := len(e.late); n > 0 {
		v := slices.Clone(e.late)
		slices.Sort(v)
		s.LatenessP50us = float64(v[n/2])
		s.LatenessP99us = float64(v[min(n-1, n*99/100)])
		s.LatenessMaxus = float64(v[n-1])
		s.LatenessSamples = n
	}
	return s
}

// pkt is a packet held for its release time.
type pkt struct {
	at  time.Time
	seq uint64
	buf []byte
}

type pktHeap []pkt

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(pkt)) }
func (h *pktHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = pkt{}
	*h = old[:len(old)-1]
	return p
}

// Buffers: reads land in a large buffer; small packets are copied out so
// that a large one is held only for a large packet.
var (
	bigPool   = sync.Pool{New: func() any { b := make([]byte, vnetHdrLen+65535); return &b }}
	smallPool = sync.Pool{New: func() any { b := make([]byte, 2048); return &b }}
)

func release(b []byte) {
	b = b[:cap(b)]
	switch cap(b) {
	case vnetHdrLen + 65535:
		bigPool.Put(&b)
	case 2048:
		smallPool.Put(&b)
	}
}

// read takes packets off the device, decides each one's fate and release
// time, and queues it.
func (e *Emulator) read() {
	defer e.done.Done()
	for {
		bp := bigPool.Get().(*[]byte)
		b := *bp
		n, err := e.tun.Read(b)
		if err != nil {
			select {
			case <-e.closing:
			default:
				e.mu.Lock()
				e.runErr = fmt.Errorf("read %s: %w", e.spec.Dev, err)
				e.mu.Unlock()
			}
			return
		}
		now := time.Now()
		if n <= vnetHdrLen {
			bigPool.Put(bp)
			continue
		}
		b = b[:n]
		if n <= 2048 {
			sp := smallPool.Get().(*[]byte)
			s := (*sp)[:n]
			copy(s, b)
			bigPool.Put(bp)
			b = s
		}
		e.admit(now, b)
	}
}

// admit queues packet b (virtio-net header and IP packet), read at now.
func (e *Emulator) admit(now time.Time, b []byte) {
	ip := b[vnetHdrLen:]
	src, dst, ok := addrs(ip)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.PacketsIn++
	e.stats.BytesIn += uint64(len(ip))
	at := now
	idx := -1
	if ok {
		for i, r := range e.spec.Routes {
			if r.From.Contains(src) && r.To.Contains(dst) {
				idx = i
				break
			}
		}
	}
	if idx < 0 {
		e.stats.Unmatched++
	} else {
		wire, segs := wireSize(b)
		t, v := e.links[idx].admit(now, wire, segs)
		switch {
		case v == lost:
			e.stats.Lost++
			release(b)
			return
		case v == queueFull || e.held+int64(len(b)) > maxHeld:
			e.stats.QueueDrops++
			release(b)
			return
		}
		at = t
	}
	e.held += int64(len(b))
	e.seq++
	heap.Push(&e.q, pkt{at: at, seq: e.seq, buf: b})
	if e.q[0].seq == e.seq {
		e.signal()
	}
}

// signal wakes the writer.
func (e *Emulator) signal() {
	one := [8]byte{1}
	unix.Write(e.wake, one[:])
}

// addrs returns an IP packet's source and destination.
func addrs(ip []byte) (src, dst netip.Addr, ok bool) {
	switch {
	case len(ip) >= 20 && ip[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), true
	case len(ip) >= 40 && ip[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), true
	}
	return netip.Addr{}, netip.Addr{}, false
}

// virtio-net header GSO types.
const (
	gsoNone  = 0
	gsoTCPv4 = 1
	gsoTCPv6 = 4
)

// wireSize returns the bytes a packet (virtio-net header, IP packet) puts
// on the wire and the number of segments: a GSO packet is cut into
// gso_size segments, each with the headers and an Ethernet header.
func wireSize(b []byte) (int64, int) {
	ip := b[vnetHdrLen:]
	gsoType := b[1] &^ 0x80
	gsoSize := int(binary.LittleEndian.Uint16(b[4:6]))
	if gsoType == gsoNone || gsoSize == 0 {
		return int64(len(ip) + ethOverhead), 1
	}
	hdr := headerLen(ip)
	payload := len(ip) - hdr
	if hdr <= 0 || payload <= 0 {
		return int64(len(ip) + ethOverhead), 1
	}
	segs := (payload + gsoSize - 1) / gsoSize
	return int64(len(ip) + (segs-1)*hdr + segs*ethOverhead), segs
}

// headerLen is the IP plus TCP header length of a TCP packet; 0 if ip is
// not one.
func headerLen(ip []byte) int {
	var h, proto int
	switch ip[0] >> 4 {
	case 4:
		h, proto = int(ip[0]&0xf)*4, int(ip[9])
	case 6:
		h, proto = 40, int(ip[6])
	default:
		return 0
	}
	if proto != unix.IPPROTO_TCP || len(ip) < h+20 {
		return 0
	}
	return h + int(ip[h+12]>>4)*4
}

// write writes each packet back to the device at its release time. It
// owns an OS thread, with the least timer slack, and sleeps in ppoll on
// the wake eventfd: precise to a few microseconds (the runtime's timers
// wake tens to hundreds late on a busy machine), and woken at once when a
// packet arrives that is due before the one it sleeps for. The last
// SpinBelow before a release it polls the clock instead.
func (e *Emulator) write() {
	defer e.done.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	var due []pkt
	fds := []unix.PollFd{{Fd: int32(e.wake), Events: unix.POLLIN}}
	var drain [8]byte
	for {
		select {
		case <-e.closing:
			return
		default:
		}
		e.mu.Lock()
		wait := time.Duration(-1)
		now := time.Now()
		for e.q.Len() > 0 {
			if d := e.q[0].at.Sub(now); d > 0 {
				wait = d
				break
			}
			due = append(due, heap.Pop(&e.q).(pkt))
		}
		e.mu.Unlock()
		if len(due) > 0 {
			e.flush(due)
			clear(due)
			due = due[:0]
			continue
		}
		if wait >= 0 && wait <= e.spec.SpinBelow {
			// Close to the release time: poll the clock.
			for t := e.peek(); !t.IsZero() && time.Until(t) > 0; t = e.peek() {
			}
			continue
		}
		var ts *unix.Timespec // nil: nothing held, sleep until woken
		if wait > 0 {
			t := unix.NsecToTimespec((wait - max(e.spec.SpinBelow, 0)).Nanoseconds())
			ts = &t
		}
		if n, _ := unix.Ppoll(fds, ts, nil); n > 0 {
			unix.Read(e.wake, drain[:])
		}
	}
}

// peek is the release time of the next packet (zero if none).
func (e *Emulator) peek() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.q.Len() == 0 {
		return time.Time{}
	}
	return e.q[0].at
}

// flush writes due packets and records how late each was.
func (e *Emulator) flush(due []pkt) {
	var errs uint64
	lates := make([]float32, 0, len(due))
	for _, p := range due {
		lates = append(lates, float32(time.Since(p.at).Microseconds()))
		if _, err := e.tun.Write(p.buf); err != nil {
			errs++
		}
	}
	e.mu.Lock()
	for i, p := range due {
		e.held -= int64(len(p.buf))
		release(p.buf)
		if len(e.late) < lateRing {
			e.late = append(e.late, lates[i])
		} else {
			e.late[e.lateAt] = lates[i]
			e.lateAt = (e.lateAt + 1) % lateRing
		}
	}
	e.stats.PacketsOut += uint64(len(due)) - errs
	e.stats.WriteErrors += errs
	e.mu.Unlock()
}
