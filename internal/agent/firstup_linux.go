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
// first transaction through the target succeeded (Unix nanoseconds; 0 if
// none did), how many attempts it started, and the last attempt's error.
type FirstUp struct {
	StartNS   int64  `json:"start_unix_ns"`
	FirstOKNS int64  `json:"first_ok_unix_ns"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// maxInFlight bounds the attempts `agent firstup` has open at once.
const maxInFlight = 256

// FirstTransaction starts an attempt every interval (each a connection and
// a one-byte request/response with the agent's server, each bounded by
// attemptTimeout) until one succeeds or timeout passes. A new attempt does
// not wait for the ones before it: a SYN lost while the path was down
// would otherwise hold the probe for the kernel's retransmission time.
func FirstTransaction(ctx context.Context, target string, interval, timeout time.Duration) FirstUp {
	const attemptTimeout = 2 * time.Second
	res := FirstUp{StartNS: time.Now().UnixNano()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	okc := make(chan int64, 1)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case sem <- struct{}{}:
			res.Attempts++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := transact(ctx, target, attemptTimeout)
				if err == nil {
					select {
					case okc <- time.Now().UnixNano():
					default:
					}
					cancel()
					return
				}
				if ctx.Err() == nil {
					mu.Lock()
					res.LastError = err.Error()
					mu.Unlock()
				}
			}()
		case <-ctx.Done():
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			select {
			case res.FirstOKNS = <-okc:
				res.LastError = ""
			default:
				if res.LastError == "" {
					res.LastError = fmt.Sprintf("no transaction within %v", timeout)
				}
			}
			return res
		case <-tick.C:
		}
	}
}

// transact makes one connection and one 1-byte request/response.
func transact(ctx context.Context, target string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(append(encodeHeader(ModeRR, 0, 1, 1), 1)); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
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
