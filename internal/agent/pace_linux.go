package agent

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Pacing: a kernel sleep wakes late (on this kind of VM by ~60 µs, with the
// default 50 µs timer slack by ~120 µs, and time.Sleep by up to a
// millisecond), and under coordinated-omission correction every
// microsecond of lateness is added to the latency measured. So a paced
// connection sleeps in the kernel, with timer slack cut to 1 ns, until a
// little before its due time, then spins the rest. How early it wakes is
// learnt from how late the kernel actually woke it (a running 90th
// percentile), so the spin, and its CPU cost, stays a few tens of
// microseconds per request.
const (
	// spinMin and spinMax bound the spin window.
	spinMin = 10 * time.Microsecond
	spinMax = 200 * time.Microsecond
	// lateStep is how far one sleep moves the lateness estimate.
	lateStep = 500 * time.Nanosecond
	// spinMargin is added to the learnt wake-up lateness.
	spinMargin = 10 * time.Microsecond
	// sleepChunk is the longest single sleep, so a connection with a long
	// period still notices the end of the run in time.
	sleepChunk = 50 * time.Millisecond
)

// pacer waits until due times. One per connection: it is not safe for
// concurrent use.
type pacer struct {
	// late estimates the 90th percentile of how late the kernel wakes
	// from a sleep.
	late time.Duration
}

func newPacer() *pacer { return &pacer{late: 60 * time.Microsecond} }

// wait returns once due has passed, or early when stop returns true. It
// reports whether it had to wait at all.
func (p *pacer) wait(due time.Time, stop func() bool) bool {
	d := time.Until(due)
	if d <= 0 {
		return false
	}
	for {
		spin := min(max(p.late+spinMargin, spinMin), spinMax)
		if d <= spin {
			break
		}
		if stop() {
			return true
		}
		want := min(d-spin, sleepChunk)
		start := time.Now()
		ts := unix.NsecToTimespec(int64(want))
		// A raw system call, as for reads: the goroutine keeps its P, so
		// the runtime's monitor does not wake every 20 µs to take Ps from
		// sleeping threads. A signal (the runtime's preemption signal
		// among them) ends the sleep early with EINTR: yield then, so a
		// garbage collection waiting to stop the world never waits for a
		// sleep, and loop.
		if _, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0); e == unix.EINTR {
			runtime.Gosched()
		}
		// Track the 90th percentile of the lateness by fixed steps (up
		// 9 for each one down): one slow wake-up on a busy machine moves
		// it by a step, not to the outlier.
		if over := time.Since(start) - want; over > p.late {
			p.late += 9 * lateStep
		} else {
			p.late -= lateStep
		}
		p.late = min(max(p.late, 0), spinMax)
		d = time.Until(due)
	}
	for time.Now().Before(due) {
		// Give the CPU to anything else that wants it (another paced
		// connection, the server) rather than burn the quantum.
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return true
}

// recordLate records in h the requests of a paced schedule that were due
// before the measured window ended but not sent by then, and returns how
// many there were. Request k is due at due(k), and k rises with it; first
// is the first request not sent; end is the window's end, in due's base.
// Each is recorded as late by end − due(k), the time it had waited when
// the window ended: a lower bound of its latency, but dropping it would
// hide the worst latencies of a path that could not keep up.
func recordLate(h *hdrhistogram.Histogram, first int64, due func(k int64) int64, end int64) (n uint64) {
	for k := first; ; k++ {
		d := due(k)
		if d >= end {
			return n
		}
		h.RecordValue(min(max(end-d, 1), h.HighestTrackableValue()))
		n++
	}
}

// pacedConn is one connection of an open-loop rr run. Connection index
// of nconn sends request k at t0 + (index + k·nconn)/rate: together the
// connections offer rate requests per second, staggered by 1/rate. A
// connection that falls behind sends at once and never skips a request;
// latency runs from the intended send time to the response's arrival, so
// time a request spent waiting to be sent counts (wrk2's correction for
// coordinated omission). Requests still unsent when the window ends are
// recorded as late (see recordLate).
type pacedConn struct {
	c            *rawConn
	t0           time.Time
	rate         float64
	nconn, index int
	req, resp    []byte
	// hist receives latencies and lag the pacing error of requests that
	// waited for their due time, both in ns, for requests sent in the
	// measured window; count counts those requests.
	hist, lag *hdrhistogram.Histogram
	count     *atomic.Uint64
	// late receives the number of requests recordLate put in hist.
	late *uint64
}

// due is when request k is due, in ns after t0.
func (w *pacedConn) due(k int64) int64 {
	return int64(float64(int64(w.index)+k*int64(w.nconn)) / w.rate * 1e9)
}

// run sends until ck stops.
func (w *pacedConn) run(ck *clock) error {
	// Timer slack is per thread: keep this goroutine on one thread, and let
	// that thread end with the goroutine (no UnlockOSThread) rather than
	// return to the pool with its slack changed.
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	p := newPacer()
	stopped := func() bool { return ck.phase.Load() == phaseStop }
	for k := int64(0); ; k++ {
		due := w.t0.Add(time.Duration(w.due(k)))
		waited := p.wait(due, stopped)
		sent := time.Now()
		ph := ck.phase.Load()
		if ph == phaseStop {
			if end, ok := ck.ended(); ok {
				*w.late = recordLate(w.hist, k, w.due, int64(end.Sub(w.t0)))
			}
			return nil
		}
		if err := w.c.writeFull(w.req); err != nil {
			return err
		}
		if err := w.c.readFull(w.resp); err != nil {
			return err
		}
		d := time.Since(due)
		if ph == phaseMeasure {
			// A backlog can outgrow the histogram's range: record such a
			// latency at the top of the range rather than drop it.
			w.hist.RecordValue(min(int64(d), w.hist.HighestTrackableValue()))
			if waited {
				w.lag.RecordValue(max(int64(sent.Sub(due)), 1))
			}
			w.count.Add(1)
		}
	}
}
