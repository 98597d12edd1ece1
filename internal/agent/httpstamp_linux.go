package agent

import (
	"encoding/binary"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A paced loop is not woken by responses. It sleeps until its next due
// time in clock_nanosleep, then takes every socket that became ready
// meanwhile from epoll without waiting. A response's latency still ends
// when it arrived: each connection asks the kernel for the receive
// timestamp of what it reads (SO_TIMESTAMPNS, the time the last segment
// of a read reached the client's network stack), and that time, not the
// read's, ends the latency. Waking for each response as well as for each
// due time cost a paced request about a third more CPU than one wake-up
// per due time does: on a VM every wake-up is a context switch and a
// reprogrammed timer.

// stampOOB is room for one SCM_TIMESTAMPNS control message.
const stampOOB = 64

// stampReader reads with recvmsg and returns the kernel's receive time.
type stampReader struct {
	msg unix.Msghdr
	iov unix.Iovec
	oob [stampOOB]byte
	// rtOff is CLOCK_REALTIME minus the loop's clock, both in ns, taken
	// at the last wake-up: kernel timestamps are in CLOCK_REALTIME.
	rtOff int64
}

// enableStamps asks the kernel to timestamp what fd receives.
func enableStamps(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// sync takes the offset of CLOCK_REALTIME to the loop's clock, which
// starts at origin.
func (s *stampReader) sync(origin time.Time) {
	t := time.Now()
	s.rtOff = t.UnixNano() - int64(t.Sub(origin))
}

// read reads into b and returns the count and the kernel's receive time of
// the last data read on the loop's clock, or -1 when there was none.
func (s *stampReader) read(fd int, b []byte) (int, int64, error) {
	if len(b) == 0 {
		return 0, -1, nil
	}
	s.iov.Base = &b[0]
	s.iov.SetLen(len(b))
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Control = &s.oob[0]
	s.msg.SetControllen(stampOOB)
	n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msg)), 0)
	if e != 0 {
		return int(n), -1, e
	}
	return int(n), s.stamp(), nil
}

// stamp parses the SCM_TIMESTAMPNS message recvmsg left in oob.
func (s *stampReader) stamp() int64 {
	oob := s.oob[:s.msg.Controllen]
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			return -1
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && l >= unix.SizeofCmsghdr+16 {
			d := oob[unix.SizeofCmsghdr:]
			sec := int64(binary.NativeEndian.Uint64(d))
			nsec := int64(binary.NativeEndian.Uint64(d[8:]))
			return sec*1e9 + nsec - s.rtOff
		}
		oob = oob[min(cmsgAlign(l), len(oob)):]
	}
	return -1
}

func cmsgAlign(n int) int { return (n + 7) &^ 7 }

// nap sleeps ns without waking for sockets. A signal ends it early (see
// httpLoop.wait).
func nap(ns int64) {
	if ns <= 0 {
		return
	}
	ts := unix.NsecToTimespec(ns)
	if _, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0); e == unix.EINTR {
		runtime.Gosched()
		unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	}
}
