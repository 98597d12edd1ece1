package agent

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// streamDialers is how many of a stream trial's connections are opened
// at once. One at a time, 512 streams over an 80 ms round trip took 41 s
// to connect; all at once they can overflow the server's accept backlog,
// and a dropped SYN costs a second.
const streamDialers = 64

// dialStreams opens n stream connections to target, streamDialers at a
// time, with congestion control cc unless it is empty, and sends each its
// stream header. On error it closes those it opened and returns the first
// error.
func dialStreams(target netip.AddrPort, n int, cc string) ([]*rawConn, error) {
	conns := make([]*rawConn, n)
	errs := make([]error, n)
	hdr := encodeHeader(ModeStream, flagPersistent, 0, 0)
	sem := make(chan struct{}, streamDialers)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := newSocket(target, ioTimeout, false)
			if err != nil {
				errs[i] = err
				return
			}
			if cc != "" {
				if err := unix.SetsockoptString(c.fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
					c.close()
					avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
					errs[i] = fmt.Errorf("tcp congestion control %q: %w (this kernel has: %s)", cc, err, strings.TrimSpace(string(avail)))
					return
				}
			}
			if err := c.connect(target); err != nil {
				c.close()
				errs[i] = err
				return
			}
			c.raw = true
			conns[i] = c
			if err := c.writeFull(hdr); err != nil {
				errs[i] = fmt.Errorf("stream header: %w", err)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
		return nil, fmt.Errorf("stream %d of %d: %w", i, n, err)
	}
	return conns, nil
}
