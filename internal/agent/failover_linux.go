package agent

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"
)

// FailoverAttempt is one transaction of `agent failover`: when it started
// and ended (Unix nanoseconds), which server answered (its --name; empty
// when the attempt failed) and why it failed.
type FailoverAttempt struct {
	StartNS int64  `json:"start"`
	EndNS   int64  `json:"end"`
	Site    string `json:"site,omitempty"`
	Error   string `json:"error,omitempty"`
}

// OK reports whether the attempt got an answer.
func (a FailoverAttempt) OK() bool { return a.Error == "" }

// FailoverSwitch is the line `agent failover` prints when the server that
// answers changes (the first answer included): which one answers now, and
// when its first answer came (Unix nanoseconds).
type FailoverSwitch struct {
	Site string `json:"site"`
	AtNS int64  `json:"at_unix_ns"`
}

// FailoverRun is the last line `agent failover` prints: every attempt, in
// the order they started.
type FailoverRun struct {
	Attempts []FailoverAttempt `json:"attempts"`
}

// failoverInFlight bounds the attempts `agent failover` has open at once:
// with the path black-holed, each waits out its timeout.
const failoverInFlight = 2048

// Failover starts a transaction with the agent's server at target every
// interval (a new connection each, mode who, bounded by attemptTimeout)
// for duration, and returns every attempt. Attempts do not wait for one
// another (EveryInterval). onSwitch, if not nil, is called when the
// server that answers changes.
func Failover(ctx context.Context, target string, interval, duration, attemptTimeout time.Duration, onSwitch func(FailoverSwitch)) FailoverRun {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var mu sync.Mutex
	var run FailoverRun
	var last FailoverSwitch
	EveryInterval(ctx, interval, failoverInFlight, func(context.Context) {
		// The attempt runs out its own time, not the run's: one started
		// just before the end still counts.
		a := FailoverAttempt{StartNS: time.Now().UnixNano()}
		site, err := who(context.Background(), target, attemptTimeout)
		a.EndNS = time.Now().UnixNano()
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Site = site
		}
		mu.Lock()
		defer mu.Unlock()
		run.Attempts = append(run.Attempts, a)
		if err == nil && site != last.Site && a.EndNS > last.AtNS {
			last = FailoverSwitch{Site: site, AtNS: a.EndNS}
			if onSwitch != nil {
				onSwitch(last)
			}
		}
	})
	sort.Slice(run.Attempts, func(i, j int) bool { return run.Attempts[i].StartNS < run.Attempts[j].StartNS })
	return run
}

// who makes one connection and asks the server its name (mode who).
func who(ctx context.Context, target string, timeout time.Duration) (string, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(encodeHeader(ModeWho, 0, 0, 0)); err != nil {
		return "", err
	}
	n := make([]byte, 1)
	if _, err := io.ReadFull(c, n); err != nil {
		return "", fmt.Errorf("response: %w", err)
	}
	name := make([]byte, n[0])
	if _, err := io.ReadFull(c, name); err != nil {
		return "", fmt.Errorf("response: %w", err)
	}
	if len(name) == 0 {
		return "", fmt.Errorf("response: the server has no name (start it with --name)")
	}
	return string(name), nil
}

// failoverMain runs `spanperf agent failover --target HOST:PORT --duration
// D [--interval D] [--attempt-timeout D]`: it prints a FailoverSwitch line
// each time the answering server changes, then a FailoverRun line.
func failoverMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "HOST:PORT of the service (servers started with --name)")
	interval := fs.Duration("interval", time.Millisecond, "start a transaction this often")
	duration := fs.Duration("duration", 0, "how long to keep starting transactions")
	attemptTimeout := fs.Duration("attempt-timeout", time.Second, "bound on each transaction")
	if fs.Parse(args) != nil {
		return 2
	}
	if *interval <= 0 || *duration <= 0 || *attemptTimeout <= 0 {
		fmt.Fprintln(stderr, "agent failover: --interval, --duration and --attempt-timeout must be > 0")
		return 2
	}
	if _, _, err := SplitTarget(*target); err != nil {
		fmt.Fprintf(stderr, "agent failover: --target: %v\n", err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	run := Failover(context.Background(), *target, *interval, *duration, *attemptTimeout, func(s FailoverSwitch) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(s)
	})
	mu.Lock()
	defer mu.Unlock()
	if err := enc.Encode(run); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
