package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// ioTimeout bounds every blocking read or write, so a vanished peer cannot
// hang an agent.
const ioTimeout = 30 * time.Second

// Ready is the line the server prints once it listens.
type Ready struct {
	Ready bool   `json:"ready"`
	Addr  string `json:"addr"`
}

// Serve listens on addr and serves every mode until the process is stopped.
func Serve(addr string, stdout io.Writer) error { return ServeAs(addr, "", stdout) }

// ServeAs is Serve for a server that answers ModeWho with name (the site
// it runs in), so that a client behind a datapath that may route to
// several servers can tell which one answered.
func ServeAs(addr, name string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent serve: %w", err)
	}
	defer ln.Close()
	if err := json.NewEncoder(stdout).Encode(Ready{Ready: true, Addr: ln.Addr().String()}); err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("agent serve: %w", err)
		}
		go handle(c.(*net.TCPConn), name)
	}
}

func handle(c *net.TCPConn, name string) {
	rc, err := blockingFD(c, ioTimeout)
	if err != nil {
		c.Close()
		return
	}
	defer rc.close()
	hdr := make([]byte, headerLen)
	if rc.readFull(hdr) != nil {
		return
	}
	mode, flags, reqSize, respSize, err := decodeHeader(hdr)
	if err != nil {
		return
	}
	if flags&flagPersistent != 0 {
		defer reserveProcs(1)()
		rc.raw = true
	}
	switch mode {
	case ModeStream:
		// Wake the receiver once per 64 KiB, not per segment: with small
		// writes a per-segment wakeup preempts the sender on every write,
		// and the receiver, not the path, would set the rate. ACKs (and so
		// the throughput the client measures) do not wait for reads.
		unix.SetsockoptInt(rc.fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 64<<10)
		buf := make([]byte, 256<<10)
		for {
			n, err := rc.read(buf)
			if n <= 0 || err != nil {
				return
			}
		}
	case ModeWho:
		rc.writeFull(append([]byte{byte(len(name))}, name...))
	case ModeRR:
		req := make([]byte, max(reqSize, 1))[:reqSize]
		resp := make([]byte, respSize)
		for {
			if rc.readFull(req) != nil {
				return
			}
			if rc.writeFull(resp) != nil {
				return
			}
		}
	}
}
