// Package agent is the `spanperf agent` process that runs inside a site: the
// server and the clients of every built-in workload. A client prints one
// JSON Result on stdout; the server prints one ready line and then serves
// until it is stopped.
//
// Wire protocol: each connection starts with a 16-byte header from the
// client: "SPF1", mode (1 byte), flags (1 byte), 2 bytes padding, request size and response
// size (big-endian uint32). Mode stream: the server reads and discards until
// EOF. Mode rr: the server reads request-size bytes and answers with
// response-size bytes, until EOF. Mode who: the server answers with the
// name it was started with (ServeAs) and closes.
package agent

import (
	"encoding/binary"
	"errors"
	"os"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Modes of a connection.
const (
	ModeStream byte = 1
	ModeRR     byte = 2
	// ModeWho: the server answers with its name (one length byte, then
	// the name; empty when it was given none) and closes.
	ModeWho byte = 3
)

// DefaultPort is the port the agent server listens on.
const DefaultPort = 7100

const headerLen = 16

var magic = [4]byte{'S', 'P', 'F', '1'}

// Result is what a client prints: the metrics of one trial.
type Result struct {
	// Metrics maps metric names (results.*) to values in base units.
	Metrics map[string]float64 `json:"metrics"`
	// Series holds per-interval series by metric name.
	Series map[string]results.Series `json:"series,omitempty"`
	// Histogram is the latency histogram, HdrHistogram V2 compressed base64, in ns.
	Histogram string `json:"histogram,omitempty"`
	// Missing names metrics the client could not report, with the reason
	// (a tail percentile from too few samples).
	Missing map[string]string `json:"missing,omitempty"`
	// Error is set when the client failed.
	Error string `json:"error,omitempty"`
}

// flagPersistent in header byte 5 says the connection carries many
// transactions (rr, stream): worth a server thread of its own.
const flagPersistent byte = 1

func encodeHeader(mode, flags byte, req, resp uint32) []byte {
	h := make([]byte, headerLen)
	copy(h, magic[:])
	h[4] = mode
	h[5] = flags
	binary.BigEndian.PutUint32(h[8:], req)
	binary.BigEndian.PutUint32(h[12:], resp)
	return h
}

func decodeHeader(h []byte) (mode, flags byte, req, resp uint32, err error) {
	if len(h) != headerLen || [4]byte(h[:4]) != magic {
		return 0, 0, 0, 0, errors.New("agent: bad header")
	}
	return h[4], h[5], binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:]), nil
}

// Command returns the command that runs `spanperf agent ARGS...` with this
// very executable, so agents always match the controller's version. In a test
// or benchmark binary, that executable must call RunIfChild first.
func Command(name string, args ...string) testbed.Command {
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	return testbed.Command{Name: name, Path: exe, Args: append([]string{"agent"}, args...), Agent: true}
}

// RunIfChild makes a binary that is not spanperf itself (a test binary, a
// benchmark) act as the agent when started as `BINARY agent ...`, as Command
// does. Call it first thing in main or TestMain of any such binary that
// starts agents: otherwise the child runs the whole binary again.
func RunIfChild() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(Main(os.Args[2:], os.Stdout, os.Stderr))
	}
}
