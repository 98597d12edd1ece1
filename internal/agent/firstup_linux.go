package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// FirstUp is what `agent firstup` prints: when it began probing, when the
// first attempt connected and when the first transaction through the
// target succeeded (Unix nanoseconds; 0 if none did), how many attempts it
// started, and the last attempt's error.
type FirstUp struct {
	StartNS        int64  `json:"start_unix_ns"`
	FirstConnectNS int64  `json:"first_connect_unix_ns,omitempty"`
	FirstOKNS      int64  `json:"first_ok_unix_ns"`
	Attempts       int    `json:"attempts"`
	LastError      string `json:"last_error,omitempty"`
}

// maxInFlight bounds the attempts a probe has open at once.
const maxInFlight = 256

// FirstTransaction starts an attempt every interval (each a connection and
// a one-byte request/response with the agent's server, each bounded by
// attemptTimeout) until one succeeds or timeout passes. A new attempt does
// not wait for the ones before it (see EveryInterval).
func FirstTransaction(ctx context.Context, target string, interval, timeout time.Duration) FirstUp {
	const attemptTimeout = 2 * time.Second
	res := FirstUp{StartNS: time.Now().UnixNano()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	var firstOK, firstConnect int64
	res.Attempts = EveryInterval(ctx, interval, maxInFlight, func(ctx context.Context) {
		connected, err := transact(ctx, target, attemptTimeout)
		now := time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		if connected != 0 && (firstConnect == 0 || connected < firstConnect) {
			firstConnect = connected
		}
		if err == nil {
			if firstOK == 0 {
				firstOK = now
			}
			cancel()
			return
		}
		if ctx.Err() == nil {
			res.LastError = err.Error()
		}
	})
	res.FirstOKNS, res.FirstConnectNS = firstOK, firstConnect
	if firstOK != 0 {
		res.LastError = ""
	} else if res.LastError == "" {
		res.LastError = fmt.Sprintf("no transaction within %v", timeout)
	}
	return res
}

// transact makes one connection and one 1-byte request/response;
// connected is when the connection was made (Unix ns; 0 if it was not).
func transact(ctx context.Context, target string, timeout time.Duration) (connected int64, err error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return 0, err
	}
	connected = time.Now().UnixNano()
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(append(encodeHeader(ModeRR, 0, 1, 1), 1)); err != nil {
		return connected, err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return connected, fmt.Errorf("response: %w", err)
	}
	return connected, nil
}

// firstupMain runs `spanperf agent firstup --interval D --timeout D`: it
// prints {"waiting":true}, reads HOST:PORT from its standard input (so that it can be started
// before the target exists and begin at once when told), probes it with
// FirstTransaction and prints a FirstUp line; exit 1 if nothing succeeded.
func firstupMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent firstup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	interval := fs.Duration("interval", time.Millisecond, "start an attempt this often")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after")
	if fs.Parse(args) != nil {
		return 2
	}
	if *interval <= 0 || *timeout <= 0 {
		fmt.Fprintln(stderr, "agent firstup: --interval and --timeout must be > 0")
		return 2
	}
	// A line now says it is started and waiting, so that whoever times
	// the datapath does not time this process's start.
	fmt.Fprintln(stdout, `{"waiting":true}`)
	line, err := bufio.NewReader(stdin).ReadString('\n')
	target := strings.TrimSpace(line)
	if err != nil && !errors.Is(err, io.EOF) || target == "" {
		fmt.Fprintf(stderr, "agent firstup: no target on standard input (%v)\n", err)
		return 2
	}
	if _, _, err := SplitTarget(target); err != nil {
		fmt.Fprintf(stderr, "agent firstup: target: %v\n", err)
		return 2
	}
	res := FirstTransaction(context.Background(), target, *interval, *timeout)
	json.NewEncoder(stdout).Encode(res)
	if res.FirstOKNS == 0 {
		return 1
	}
	return 0
}
