package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/sys/unix"
)

// The cleartext HTTP client is an event loop per thread, as wrk's: each
// loop owns some of the connections, non-blocking sockets in one epoll
// set, and sends, reads and parses on one locked OS thread with direct
// system calls. One epoll_wait serves every connection that is ready, so a
// request costs a write and a read, not a goroutine hand-off per
// connection; net/http's client cost three times wrk's CPU per request.
// HTTP/2 is framed by hand (HEADERS out, HEADERS/DATA in, SETTINGS, PING,
// WINDOW_UPDATE, GOAWAY, RST_STREAM) with HPACK from x/net for the
// response headers. TLS stays on net/http (crypto/tls).
//
// Pacing sleeps in clock_nanosleep with 1 ns timer slack until the next
// due time, then takes the sockets that became ready from epoll without
// waiting (responses carry the kernel's receive time: httpstamp_linux.go),
// and does not spin: spinning would cost
// more CPU per request than the request itself. The kernel's wake-up
// lateness therefore counts into the corrected latency, as in wrk2, and is
// reported as send lag. When a loop's requests are due less than
// coalesceMax apart, a wake-up costs more than the gap (a context switch
// on a VM is tens of microseconds of CPU): the loop then sleeps one gap
// past the due time and sends everything due by then, so each request is
// at most one gap late, and that lateness too counts into its latency.

// loopInflight is one request on the wire.
type loopInflight struct {
	due, sent int64 // ns since the loop's origin
	measured  bool
	status    int
	body      int
}

// loopConn is one connection of a loop.
type loopConn struct {
	index int // the connection's number among all, 0..Connections-1
	slot  int // its place in the loop's conns, carried in epoll events
	fd    int
	dead  bool
	// nextK is the number of the next request of this connection's
	// schedule; owed counts those due and not yet sent (paced).
	nextK int64
	owed  int
	// rbuf[r:w] is read and not yet parsed.
	rbuf []byte
	r, w int
	// out is written-but-not-sent data (after EAGAIN) and writing says
	// EPOLLOUT is armed.
	out     []byte
	writing bool

	// HTTP/1.1: one request in flight (busy), the response's remaining
	// body (-1 while reading its header) and whether the server closes.
	busy     bool
	h1       loopInflight
	bodyLeft int
	closing  bool

	// HTTP/2.
	streams    map[uint32]loopInflight
	nextStream uint32
	maxStreams int
	dec        *hpack.Decoder
	hdrStream  uint32 // stream whose header block is being read
	hdrEnd     bool   // that block's HEADERS frame ended the stream
	curStatus  int
	recvd      int // DATA bytes received since the last connection WINDOW_UPDATE
}

func (c *loopConn) inflight() int {
	if c.streams != nil {
		return len(c.streams)
	}
	if c.busy {
		return 1
	}
	return 0
}

// httpLoop is one event loop and its connections.
type httpLoop struct {
	spec   HTTPClientSpec
	h2     bool
	conns  []*loopConn
	epfd   int
	origin time.Time
	period float64 // ns between consecutive due times across all connections
	seq    int64   // next slot of this loop's schedule (paced)
	// coalesce is how long past a due time the loop may sleep (paced):
	// its gap between due times when that is under coalesceMax, else 0.
	coalesce int64
	req      []byte // HTTP/1.1 request, or the HTTP/2 request's HPACK block
	ck       *clock

	hist, lag      *hdrhistogram.Histogram
	ok             atomic.Uint64 // measured successes, read by the sampler
	errs, timeouts uint64
	late           uint64 // requests unsent at the window's end (recordLate)
	firstErr       error
	events         []unix.EpollEvent
	measuring      bool
	stopping       bool
	// sr reads a paced loop's responses with their receive times (see
	// httpstamp_linux.go).
	sr stampReader
	// polled says the last wait found a socket ready within pollSoon, or
	// the last poll found one, so the next wait polls first (closed loop).
	polled bool
}

const (
	h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	// h2MaxWindow is the largest flow-control window: the loop grants it
	// for every stream and the connection, so the server never waits for
	// a WINDOW_UPDATE.
	h2MaxWindow = 1<<31 - 1
	// h2DefaultMaxStreams is assumed until the server's SETTINGS say;
	// h2StreamCap bounds what the loop keeps in flight on one connection.
	h2DefaultMaxStreams = 100
	h2StreamCap         = 1024
	loopReadBuf         = 64 << 10
	// coalesceMax is the widest gap between a loop's due times at which
	// it still wakes once per gap rather than per request.
	coalesceMax = 50 * time.Microsecond
	// pollSoon: a closed loop whose last sleep in epoll ended sooner than
	// this polls before its next one (see poll).
	pollSoon = 10 * time.Microsecond
)

// HTTP/2 frame types and flags used here (RFC 9113 §6).
const (
	frData         = 0x0
	frHeaders      = 0x1
	frRSTStream    = 0x3
	frSettings     = 0x4
	frPushPromise  = 0x5
	frPing         = 0x6
	frGoAway       = 0x7
	frContinuation = 0x9
	flEndStream    = 0x1
	flAck          = 0x1
	flEndHeaders   = 0x4
	flPadded       = 0x8
	flPriority     = 0x20
)

// newHTTPLoop dials the connections numbered by indexes, for a spec that
// RunHTTPClient normalized (Streams and Threads ≥ 1); the engine sets
// origin and ck before run.
func newHTTPLoop(s HTTPClientSpec, indexes []int) (*httpLoop, error) {
	l := &httpLoop{spec: s, h2: s.Protocol == "http2",
		hist: newHist(), lag: newHist(), events: make([]unix.EpollEvent, 128)}
	if s.Rate > 0 {
		l.period = 1e9 / s.Rate
		if gap := l.period * float64(s.Threads); gap < float64(coalesceMax) {
			l.coalesce = int64(gap)
		}
	}
	if l.h2 {
		l.req = h2RequestBlock(s)
	} else {
		// Only what HTTP/1.1 requires, as wrk sends: every header more is
		// parsed by the server on each request.
		l.req = []byte("GET " + s.Path + " HTTP/1.1\r\nHost: " + s.Target.String() + "\r\n\r\n")
	}
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	for slot, i := range indexes {
		c := &loopConn{index: i, slot: slot, rbuf: make([]byte, loopReadBuf), bodyLeft: -1}
		l.conns = append(l.conns, c)
		if err := l.connect(c); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// h2RequestBlock is the HPACK block of every request: fields from the
// static table or literal without indexing, so the same bytes are valid
// on every stream whatever the encoder's table holds.
func h2RequestBlock(s HTTPClientSpec) []byte {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: s.Path, Sensitive: true},
		{Name: ":authority", Value: s.Target.String(), Sensitive: true},
		{Name: "user-agent", Value: "spanperf", Sensitive: true},
	} {
		e.WriteField(f)
	}
	return b.Bytes()
}

// connect (re)opens c: a blocking connect, then non-blocking in the epoll
// set; HTTP/2 sends its preface, SETTINGS (no push, the largest stream
// window) and the connection's WINDOW_UPDATE.
func (l *httpLoop) connect(c *loopConn) error {
	rc, err := dial(l.spec.Target, ioTimeout, true)
	if err != nil {
		return err
	}
	if err := unix.SetNonblock(rc.fd, true); err != nil {
		unix.Close(rc.fd)
		return err
	}
	if l.period > 0 {
		if err := enableStamps(rc.fd); err != nil {
			unix.Close(rc.fd)
			return fmt.Errorf("receive timestamps: %w", err)
		}
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.slot)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, rc.fd, &ev); err != nil {
		unix.Close(rc.fd)
		return fmt.Errorf("epoll: %w", err)
	}
	c.fd, c.dead, c.r, c.w, c.out, c.writing = rc.fd, false, 0, 0, c.out[:0], false
	c.busy, c.bodyLeft, c.closing = false, -1, false
	if l.h2 {
		c.streams = make(map[uint32]loopInflight)
		c.nextStream, c.maxStreams, c.hdrStream, c.recvd = 1, h2DefaultMaxStreams, 0, 0
		c.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
			if f.Name == ":status" {
				c.curStatus, _ = strconv.Atoi(f.Value)
			}
		})
		c.out = append(c.out, h2Preface...)
		c.out = appendFrame(c.out, frSettings, 0, 0, []byte{0, 2, 0, 0, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff})
		c.out = appendWindowUpdate(c.out, 0, h2MaxWindow-65535)
		l.flush(c)
	}
	return nil
}

func appendFrame(b []byte, typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

func appendWindowUpdate(b []byte, stream uint32, inc uint32) []byte {
	return appendFrame(b, 0x8, 0, stream, binary.BigEndian.AppendUint32(nil, inc))
}

func (l *httpLoop) close() {
	for _, c := range l.conns {
		if !c.dead && c.fd > 0 {
			unix.Close(c.fd)
		}
	}
	unix.Close(l.epfd)
}

// now is the time since the loop's origin in ns.
func (l *httpLoop) now() int64 { return int64(time.Since(l.origin)) }

// dueOf is when request k of connection index is due (paced).
func (l *httpLoop) dueOf(index int, k int64) int64 {
	return int64(float64(int64(index)+k*int64(l.spec.Connections)) * l.period)
}

// slotDue is the due time of slot seq of this loop's schedule: the loop's
// connections take their turns in order, so the slots' due times rise.
func (l *httpLoop) slotDue(seq int64) (int64, *loopConn) {
	n := int64(len(l.conns))
	c := l.conns[seq%n]
	return l.dueOf(c.index, seq/n), c
}

// canSend says whether c may put another request on the wire now.
func (l *httpLoop) canSend(c *loopConn) bool {
	if c.dead {
		return false
	}
	if l.h2 {
		return len(c.streams) < min(c.maxStreams, h2StreamCap)
	}
	return !c.busy
}

// send queues one request on c (flushed by the caller) with its due time.
func (l *httpLoop) send(c *loopConn, due, now int64) {
	f := loopInflight{due: due, sent: now, measured: l.measuring}
	if l.h2 {
		id := c.nextStream
		c.nextStream += 2
		c.out = appendFrame(c.out, frHeaders, flEndStream|flEndHeaders, id, l.req)
		c.streams[id] = f
		return
	}
	c.out = append(c.out, l.req...)
	c.busy, c.h1 = true, f
}

// sendOwed sends c's owed requests as far as it may, each with its own due
// time, and reports whether it sent any.
func (l *httpLoop) sendOwed(c *loopConn, now int64) bool {
	sent := false
	for c.owed > 0 && l.canSend(c) && !l.stopping {
		l.send(c, l.dueOf(c.index, c.nextK), now)
		c.nextK++
		c.owed--
		sent = true
	}
	return sent
}

// flush writes c.out; what the socket does not take waits for EPOLLOUT.
func (l *httpLoop) flush(c *loopConn) {
	for len(c.out) > 0 && !c.dead {
		n, err := rawWrite(c.fd, c.out)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if !c.writing {
				c.writing = true
				l.arm(c, unix.EPOLLIN|unix.EPOLLOUT|unix.EPOLLRDHUP)
			}
			return
		case err != nil:
			l.fail(c, fmt.Errorf("write: %w", err))
			return
		}
		c.out = c.out[:copy(c.out, c.out[n:])]
	}
	if c.writing && !c.dead {
		c.writing = false
		l.arm(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
}

func (l *httpLoop) arm(c *loopConn, events uint32) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.slot)})
}

// record counts one finished request.
func (l *httpLoop) record(f loopInflight, now int64, err error) {
	if err != nil && l.firstErr == nil {
		// Kept even from the warm-up: it may be the only clue.
		l.firstErr = err
	}
	if !f.measured {
		return
	}
	if err != nil {
		l.errs++
		return
	}
	l.hist.RecordValue(min(max(now-f.due, 1), l.hist.HighestTrackableValue()))
	l.ok.Add(1)
}

// complete ends a response: a status other than 200 or a body of another
// size than expected is an error.
func (l *httpLoop) complete(f loopInflight, now int64) {
	var err error
	switch {
	case f.status != 200:
		err = fmt.Errorf("status %d", f.status)
	case f.body != l.spec.BodySize:
		err = fmt.Errorf("body of %d bytes, want %d", f.body, l.spec.BodySize)
	}
	l.record(f, now, err)
}

// fail ends connection c: its requests in flight are errors, and it is
// reconnected; requests owed to it wait for the new connection.
func (l *httpLoop) fail(c *loopConn, err error) {
	now := l.now()
	if c.busy {
		l.record(c.h1, now, err)
	}
	for _, f := range c.streams {
		l.record(f, now, err)
	}
	l.reconnect(c, now, err)
}

// reconnect replaces c's socket with a new connection (not once the run
// is stopping) and puts requests on it: those owed (paced) or a fresh
// round (closed loop). cause is why, for the error when it fails.
func (l *httpLoop) reconnect(c *loopConn, now int64, cause error) {
	l.drop(c)
	if l.stopping {
		return
	}
	if err := l.connect(c); err != nil {
		if l.firstErr == nil {
			l.firstErr = fmt.Errorf("%v; reconnect: %w", cause, err)
		}
		return
	}
	if l.period > 0 {
		l.sendOwed(c, now)
	} else {
		for i := 0; i < l.spec.Streams && l.canSend(c); i++ {
			l.send(c, now, now)
		}
	}
	l.flush(c)
}

// drop closes c's socket and forgets what was in flight on it.
func (l *httpLoop) drop(c *loopConn) {
	if !c.dead {
		unix.Close(c.fd)
	}
	c.dead, c.busy, c.streams = true, false, nil
}

// timeout ends every request in flight longer than the timeout as a
// timeout: HTTP/1.1 by dropping and reconnecting the connection, HTTP/2 by
// forgetting the stream (a late answer on it is ignored).
func (l *httpLoop) expire(now int64) {
	limit := int64(l.spec.Timeout)
	for _, c := range l.conns {
		if c.dead {
			continue
		}
		if c.busy && now-c.h1.sent > limit {
			if c.h1.measured {
				l.timeouts++
			}
			l.reconnect(c, now, errors.New("request timed out"))
			continue
		}
		for id, f := range c.streams {
			if now-f.sent > limit {
				if f.measured {
					l.timeouts++
				}
				delete(c.streams, id)
			}
		}
	}
}

func (l *httpLoop) inflight() (n int) {
	for _, c := range l.conns {
		n += c.inflight()
	}
	return n
}

func (l *httpLoop) alive() bool {
	for _, c := range l.conns {
		if !c.dead {
			return true
		}
	}
	return false
}

// run drives the loop until the clock stops and the requests in flight
// are answered or time out. It must run on its own goroutine, which holds
// a P (see reserveProcs). It is not locked to its thread: when the
// runtime preempts it (every 10 ms, as it seems to run without pause), a
// locked goroutine would wait for another thread to pick it up and hand
// it back, two OS wake-ups that on a saturated machine took milliseconds
// and showed as p99 outliers at high rates. Timer slack is per thread, so
// it is set again after each preemption.
func (l *httpLoop) run() {
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	paced := l.period > 0
	if !paced {
		now := l.now()
		for _, c := range l.conns {
			for i := 0; i < l.spec.Streams && l.canSend(c); i++ {
				l.send(c, now, now)
			}
			l.flush(c)
		}
	}
	var stopAt, lastExpire int64
	for {
		now := l.now()
		switch ph := l.ck.phase.Load(); {
		case ph == phaseMeasure:
			l.measuring = true
		case ph == phaseStop && !l.stopping:
			l.stopping, l.measuring, stopAt = true, false, now
			l.countLate()
		}
		if l.stopping && (l.inflight() == 0 || now-stopAt > int64(l.spec.Timeout)) {
			l.timeouts += uint64(l.inflightMeasured())
			return
		}
		if !l.alive() {
			if l.firstErr == nil {
				l.firstErr = errors.New("every connection failed")
			}
			return
		}
		wait := int64(50 * time.Millisecond)
		if paced && !l.stopping {
			for {
				due, c := l.slotDue(l.seq)
				if due > now {
					wait = min(wait, due-now+l.coalesce)
					break
				}
				l.seq++
				c.owed++
				if c.owed == 1 && l.canSend(c) && l.measuring {
					// On time: the pacing error is measurable (over the
					// window, as latency is: not the warm-up's start).
					l.lag.RecordValue(max(now-due, 1))
				}
				if l.sendOwed(c, now) {
					l.flush(c)
				}
			}
		}
		if now-lastExpire > int64(10*time.Millisecond) {
			l.expire(now)
			lastExpire = now
		}
		n := 0
		if !paced {
			n = l.poll()
		} else if !l.stopping {
			// Sleep to the due time, then take what is ready.
			nap(wait)
			wait = 0
		}
		if n == 0 {
			n = l.wait(wait)
			if !paced {
				l.polled = l.now()-now < int64(pollSoon)
			}
		}
		now = l.now()
		if paced {
			l.sr.sync(l.origin)
		}
		for _, ev := range l.events[:n] {
			c := l.conns[ev.Fd]
			if c.dead {
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				l.flush(c)
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				l.readable(c, now)
			}
		}
	}
}

// countLate records as late (see recordLate) each paced request due before
// the window's end and not sent: those owed to a busy connection and those
// whose slot the loop had not reached. A connection has sent every request
// before its nextK, so its unsent ones start there.
func (l *httpLoop) countLate() {
	end, ok := l.ck.ended()
	if l.period == 0 || !ok {
		return
	}
	for _, c := range l.conns {
		l.late += recordLate(l.hist, c.nextK, func(k int64) int64 { return l.dueOf(c.index, k) }, int64(end.Sub(l.origin)))
	}
}

func (l *httpLoop) inflightMeasured() (n int) {
	for _, c := range l.conns {
		if c.busy && c.h1.measured {
			n++
		}
		for _, f := range c.streams {
			if f.measured {
				n++
			}
		}
	}
	return n
}

// wait is epoll_pwait2 for at most ns, as a raw system call: the thread
// keeps its P. A signal (the runtime's preemption among them) ends it with
// EINTR; it yields then, so a stop-the-world never waits on it, and sets
// the timer slack of whichever thread it resumes on.
func (l *httpLoop) wait(ns int64) int {
	ts := unix.NsecToTimespec(max(ns, 0))
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])),
		uintptr(len(l.events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
	if e != 0 {
		runtime.Gosched()
		unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		return 0
	}
	return int(n)
}

// poll looks for ready sockets without sleeping: once, then once more
// after yielding the CPU, while the last wait found one soon (polled); it
// returns how many it found. A closed loop answers a response in less time
// than the server takes for the next, so it often finds nothing ready, and
// sleeping then costs more than looking again: the loop's own sleep and
// wake-up, and the server's wake-up of it, which on a VM is an
// interprocessor interrupt or, on a core shared with the server, a
// preemption of the server. Against one nginx worker on the loaded 2-core
// VM the old loop slept 0.6–0.9 times per request (wrk 0.4) and nginx was
// preempted 0.7–0.8 times per request (with wrk 0.4). Yielding gives a core
// shared with the server to the server, so the second look usually finds
// its response; on a core of its own the yield returns at once, and the
// two looks cost about 1 µs. Polling longer (up to 5 or 10 µs) cut the
// sleeps further under load but spun on a quiet core: the client's CPU per
// request rose above wrk's.
func (l *httpLoop) poll() int {
	if !l.polled {
		return 0
	}
	if n := l.wait(0); n > 0 {
		return n
	}
	unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	if n := l.wait(0); n > 0 {
		return n
	}
	l.polled = false
	return 0
}

// readable reads what c has and parses it.
func (l *httpLoop) readable(c *loopConn, now int64) {
	for !c.dead {
		if c.w == len(c.rbuf) {
			if c.r == 0 {
				// A header larger than the buffer, or an HTTP/2 frame
				// larger than the default maximum the loop accepts.
				l.fail(c, errors.New("response header or frame larger than 64 KiB"))
				return
			}
			c.w = copy(c.rbuf, c.rbuf[c.r:c.w])
			c.r = 0
		}
		avail := len(c.rbuf) - c.w
		var n int
		var err error
		at := now
		if l.period > 0 {
			var stamp int64
			n, stamp, err = l.sr.read(c.fd, c.rbuf[c.w:])
			if stamp >= 0 {
				// The response arrived then; the loop took it later.
				at = min(stamp, now)
			}
		} else {
			n, err = rawRead(c.fd, c.rbuf[c.w:])
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			l.fail(c, fmt.Errorf("read: %w", err))
			return
		case n == 0:
			l.fail(c, errors.New("connection closed by the server"))
			return
		}
		c.w += n
		var perr error
		if l.h2 {
			perr = l.parseH2(c, at)
		} else {
			perr = l.parseH1(c, at)
		}
		if perr != nil {
			l.fail(c, perr)
			return
		}
		if c.r == c.w {
			c.r, c.w = 0, 0
		}
		if len(c.out) > 0 {
			l.flush(c)
		}
		if c.closing && !c.busy {
			// The server said Connection: close.
			l.reconnect(c, now, errors.New("the server closed the connection"))
			return
		}
		if n < avail {
			// A short read: the socket is drained.
			return
		}
	}
}

// next puts the following request on c after a response: an owed one
// (paced), or at once (closed loop).
func (l *httpLoop) next(c *loopConn, now int64) {
	if l.stopping {
		return
	}
	if l.period > 0 {
		l.sendOwed(c, now)
	} else if l.canSend(c) {
		l.send(c, now, now)
	}
}

var (
	crlf2         = []byte("\r\n\r\n")
	contentLength = []byte("content-length:")
	connClose     = []byte("connection: close")
	chunked       = []byte("transfer-encoding:")
)

// parseH1 consumes responses from c.rbuf[c.r:c.w].
func (l *httpLoop) parseH1(c *loopConn, now int64) error {
	for c.r < c.w {
		if c.bodyLeft < 0 {
			end := bytes.Index(c.rbuf[c.r:c.w], crlf2)
			if end < 0 {
				return nil
			}
			if !c.busy {
				return errors.New("response without a request")
			}
			status, length, closing, err := parseH1Header(c.rbuf[c.r : c.r+end+2])
			if err != nil {
				return err
			}
			c.r += end + 4
			c.h1.status, c.bodyLeft, c.closing = status, length, closing
		}
		take := min(c.bodyLeft, c.w-c.r)
		c.r += take
		c.bodyLeft -= take
		c.h1.body += take
		if c.bodyLeft > 0 {
			return nil
		}
		c.bodyLeft = -1
		c.busy = false
		l.complete(c.h1, now)
		if !c.closing {
			l.next(c, now)
		}
	}
	return nil
}

// parseH1Header reads a response header (without its final blank line):
// the status, Content-Length and whether the server closes the connection.
// A response without Content-Length (chunked or close-delimited) is an
// error: the loop does not read those.
func parseH1Header(h []byte) (status, length int, closing bool, err error) {
	if len(h) < 12 || !bytes.HasPrefix(h, []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("bad status line %q", firstLine(h))
	}
	if status, err = strconv.Atoi(string(h[9:12])); err != nil {
		return 0, 0, false, fmt.Errorf("bad status line %q", firstLine(h))
	}
	length = -1
	for len(h) > 0 {
		i := bytes.Index(h, []byte("\r\n"))
		if i < 0 {
			i = len(h)
		}
		line := h[:i]
		h = h[min(i+2, len(h)):]
		switch {
		case hasFoldPrefix(line, contentLength):
			if length, err = strconv.Atoi(string(bytes.TrimSpace(line[len(contentLength):]))); err != nil || length < 0 {
				return 0, 0, false, fmt.Errorf("bad %q", line)
			}
		case hasFoldPrefix(line, connClose):
			closing = true
		case hasFoldPrefix(line, chunked):
			return 0, 0, false, fmt.Errorf("%q: only Content-Length bodies are read", line)
		}
	}
	if length < 0 {
		if status == 204 || status == 304 {
			return status, 0, closing, nil
		}
		return 0, 0, false, errors.New("response without Content-Length")
	}
	return status, length, closing, nil
}

func hasFoldPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\r'); i >= 0 {
		return b[:i]
	}
	return b
}

// parseH2 consumes whole frames from c.rbuf[c.r:c.w].
func (l *httpLoop) parseH2(c *loopConn, now int64) error {
	for c.w-c.r >= 9 {
		h := c.rbuf[c.r:]
		length := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := h[3], h[4]
		id := binary.BigEndian.Uint32(h[5:9]) & 0x7fffffff
		if 9+length > len(c.rbuf) {
			return fmt.Errorf("HTTP/2 frame of %d bytes, above the default maximum", length)
		}
		if c.w-c.r < 9+length {
			return nil
		}
		p := h[9 : 9+length]
		c.r += 9 + length
		if err := l.frameH2(c, typ, flags, id, p, now); err != nil {
			return err
		}
	}
	return nil
}

// unpad strips a padded frame's padding.
func unpad(flags byte, p []byte) ([]byte, error) {
	if flags&flPadded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, errors.New("HTTP/2: bad padding")
	}
	return p[1 : len(p)-int(p[0])], nil
}

func (l *httpLoop) frameH2(c *loopConn, typ, flags byte, id uint32, p []byte, now int64) error {
	if c.hdrStream != 0 && typ != frContinuation {
		return errors.New("HTTP/2: header block interrupted")
	}
	switch typ {
	case frData:
		c.recvd += len(p)
		if c.recvd >= 1<<30 {
			c.out = appendWindowUpdate(c.out, 0, uint32(c.recvd))
			c.recvd = 0
		}
		data, err := unpad(flags, p)
		if err != nil {
			return err
		}
		if f, ok := c.streams[id]; ok {
			f.body += len(data)
			c.streams[id] = f
			if flags&flEndStream != 0 {
				l.endStream(c, id, now)
			}
		}
	case frHeaders:
		block, err := unpad(flags, p)
		if err != nil {
			return err
		}
		if flags&flPriority != 0 {
			if len(block) < 5 {
				return errors.New("HTTP/2: short HEADERS")
			}
			block = block[5:]
		}
		c.hdrStream, c.hdrEnd, c.curStatus = id, flags&flEndStream != 0, 0
		return l.headerBlock(c, block, flags&flEndHeaders != 0, now)
	case frContinuation:
		if id != c.hdrStream {
			return errors.New("HTTP/2: unexpected CONTINUATION")
		}
		return l.headerBlock(c, p, flags&flEndHeaders != 0, now)
	case frRSTStream:
		if f, ok := c.streams[id]; ok {
			delete(c.streams, id)
			code := uint32(0)
			if len(p) == 4 {
				code = binary.BigEndian.Uint32(p)
			}
			l.record(f, now, fmt.Errorf("HTTP/2 stream reset, code %d", code))
			l.next(c, now)
		}
	case frSettings:
		if flags&flAck != 0 {
			return nil
		}
		for ; len(p) >= 6; p = p[6:] {
			if binary.BigEndian.Uint16(p) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
				c.maxStreams = int(min(binary.BigEndian.Uint32(p[2:]), h2StreamCap))
			}
		}
		c.out = appendFrame(c.out, frSettings, flAck, 0, nil)
	case frPing:
		if flags&flAck == 0 {
			c.out = appendFrame(c.out, frPing, flAck, 0, p)
		}
	case frGoAway:
		return errors.New("HTTP/2: the server sent GOAWAY")
	case frPushPromise:
		return errors.New("HTTP/2: PUSH_PROMISE although push is disabled")
	}
	return nil
}

// headerBlock feeds a fragment of a response's header block to c's HPACK
// decoder; at its end the status is known, and a HEADERS frame that ended
// the stream ends the response.
func (l *httpLoop) headerBlock(c *loopConn, frag []byte, end bool, now int64) error {
	if _, err := c.dec.Write(frag); err != nil {
		return fmt.Errorf("HTTP/2 HPACK: %w", err)
	}
	if !end {
		return nil
	}
	if err := c.dec.Close(); err != nil {
		return fmt.Errorf("HTTP/2 HPACK: %w", err)
	}
	id := c.hdrStream
	c.hdrStream = 0
	f, ok := c.streams[id]
	if !ok {
		return nil
	}
	if c.curStatus >= 100 && c.curStatus < 200 {
		return nil // an interim response; the final one follows
	}
	f.status = c.curStatus
	c.streams[id] = f
	if c.hdrEnd {
		l.endStream(c, id, now)
	}
	return nil
}

func (l *httpLoop) endStream(c *loopConn, id uint32, now int64) {
	f := c.streams[id]
	delete(c.streams, id)
	l.complete(f, now)
	l.next(c, now)
}
