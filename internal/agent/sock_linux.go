package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawConn is a TCP socket in blocking mode driven by direct system calls:
// one read or write is one syscall, with no poller round trip, as in C tools.
type rawConn struct {
	fd   int
	raw  bool     // use rawRead/rawWrite: the caller reserved a P
	conn net.Conn // keeps an accepted socket's owner alive; nil for dialed sockets
}

// blockingFD turns an accepted connection's socket into a blocking rawConn.
func blockingFD(c *net.TCPConn, timeout time.Duration) (*rawConn, error) {
	sc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var serr error
	if err := sc.Control(func(f uintptr) {
		fd = int(f)
		serr = setBlocking(fd, timeout)
	}); err != nil {
		return nil, err
	}
	return &rawConn{fd: fd, conn: c}, serr
}

func setBlocking(fd int, timeout time.Duration) error {
	if err := unix.SetNonblock(fd, false); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	return errors.Join(
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv),
	)
}

// dial opens a blocking TCP connection to addr.
func dial(addr netip.AddrPort, timeout time.Duration, nodelay bool) (*rawConn, error) {
	c, err := newSocket(addr, timeout, nodelay)
	if err != nil {
		return nil, err
	}
	if err := c.connect(addr); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// newSocket makes a blocking TCP socket for addr's family, not connected.
func newSocket(addr netip.AddrPort, timeout time.Duration, nodelay bool) (*rawConn, error) {
	fam := unix.AF_INET
	if addr.Addr().Is6() {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := setBlocking(fd, timeout); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if nodelay {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	return &rawConn{fd: fd}, nil
}

// connect connects a socket from newSocket to addr.
func (c *rawConn) connect(addr netip.AddrPort) error {
	var sa unix.Sockaddr
	if addr.Addr().Is4() {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	for {
		err := unix.Connect(c.fd, sa)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("connect %s: %w", addr, err)
		}
		return nil
	}
}

// rawRead and rawWrite are read(2) and write(2) without the runtime's
// syscall bookkeeping: the goroutine keeps its P while blocked in the kernel,
// as a C thread would, so a round trip costs no scheduler handoff or sysmon
// wakeup. Callers must own a P to spare: see reserveProcs.
func rawRead(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return int(n), e
	}
	return int(n), nil
}

// reserved counts goroutines that block in raw system calls.
var reserved atomic.Int32

// reserveProcs makes room for n more goroutines that each hold a P while
// blocked in the kernel, keeping two Ps for everything else (timers, the
// sampler, accept). GOMAXPROCS only grows. It returns the release function.
func reserveProcs(n int) func() {
	total := int(reserved.Add(int32(n)))
	if want := total + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	return func() { reserved.Add(-int32(n)) }
}

// writeFull writes all of b.
func (c *rawConn) writeFull(b []byte) error {
	for len(b) > 0 {
		n, err := c.write(b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readFull fills b; io.EOF-like errors come back as errEOF.
func (c *rawConn) readFull(b []byte) error {
	for len(b) > 0 {
		n, err := c.readOnce(b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return errEOF
		}
		b = b[n:]
	}
	return nil
}

func (c *rawConn) readOnce(b []byte) (int, error) {
	if c.raw {
		return rawRead(c.fd, b)
	}
	return unix.Read(c.fd, b)
}

func (c *rawConn) write(b []byte) (int, error) {
	if c.raw {
		return rawWrite(c.fd, b)
	}
	return unix.Write(c.fd, b)
}

// read reads once.
func (c *rawConn) read(b []byte) (int, error) {
	for {
		n, err := c.readOnce(b)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

func (c *rawConn) tcpInfo() (*unix.TCPInfo, error) {
	return unix.GetsockoptTCPInfo(c.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
}

// sendBuffer is the socket's send buffer as the kernel has sized it
// (SO_SNDBUF: autotuned unless set), in bytes.
func (c *rawConn) sendBuffer() int {
	n, _ := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	return n
}

func (c *rawConn) shutdownWrite() { unix.Shutdown(c.fd, unix.SHUT_WR) }

func (c *rawConn) close() error {
	if c.conn != nil {
		return c.conn.Close()
	}
	return unix.Close(c.fd)
}

var errEOF = errors.New("connection closed by peer")
