package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// What a pod site needs of the agent: the pod's own command (sleep, since
// the image has no shell), and a way to stop a process started by exec,
// since ending an exec stream does not end the remote process.

// Exit statuses of `agent signal`.
const (
	// SignalSent: the process was signalled.
	SignalSent = 0
	// SignalNotRunning: no pidfile (within --wait), or its process has
	// exited (its PID is gone or belongs to a later process).
	SignalNotRunning = 3
)

// Sleep blocks until SIGTERM or SIGINT arrives. As the agent pod's PID 1
// it also reaps orphans, which the kernel hands to it.
func Sleep() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

// WritePidfile writes "PID START" (START: the process's start time in
// clock ticks, see testbed.ProcStart) to path, atomically, so that
// SignalPidfile never signals a later process that reused the PID.
func WritePidfile(path string, pid int) error {
	start, err := testbed.ProcStart(pid)
	if err != nil {
		return fmt.Errorf("pidfile %s: %w", path, err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644); err != nil {
		return fmt.Errorf("pidfile %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pidfile %s: %w", path, err)
	}
	return nil
}

// ErrNotRunning is returned by SignalPidfile when there is no pidfile or
// its process has exited.
var ErrNotRunning = errors.New("not running")

// SignalPidfile sends sig to the process a pidfile written by WritePidfile
// names, waiting up to wait for the file to appear (a process just
// started may not have written it yet). It returns ErrNotRunning (wrapped)
// when there is no file or its process has exited.
func SignalPidfile(path string, sig syscall.Signal, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var b []byte
	for {
		var err error
		b, err = os.ReadFile(path)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pidfile %s: %w", path, err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("pidfile %s: no such file: %w", path, ErrNotRunning)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fmt.Errorf("pidfile %s: want \"PID START\", got %q", path, b)
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return fmt.Errorf("pidfile %s: want \"PID START\", got %q", path, b)
	}
	if !testbed.Alive(pid, start) {
		return fmt.Errorf("pidfile %s: pid %d: %w", path, pid, ErrNotRunning)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pidfile %s: pid %d: %w", path, pid, ErrNotRunning)
		}
		return fmt.Errorf("pidfile %s: kill %d: %w", path, pid, err)
	}
	return nil
}

// signals are the signals `agent signal` sends, by name.
var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT}

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }
func (e *envList) Set(s string) error {
	if !strings.Contains(s, "=") || strings.HasPrefix(s, "=") {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	*e = append(*e, s)
	return nil
}

// podMain runs the subcommands sleep, run and signal (see Main).
func podMain(args []string, stderr io.Writer) int {
	switch args[0] {
	case "sleep":
		fs := flag.NewFlagSet("agent sleep", flag.ContinueOnError)
		fs.SetOutput(stderr)
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if fs.NArg() != 0 {
			fmt.Fprintln(stderr, "usage: spanperf agent sleep")
			return 2
		}
		Sleep()
		return 0
	case "run":
		fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
		fs.SetOutput(stderr)
		pidfile := fs.String("pidfile", "", "file to write \"PID START\" to (required)")
		var env envList
		fs.Var(&env, "env", "KEY=VALUE added to the environment (repeatable)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if *pidfile == "" || fs.NArg() == 0 {
			fmt.Fprintln(stderr, "usage: spanperf agent run --pidfile FILE [--env K=V]... -- ARGS...")
			return 2
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "agent run:", err)
			return 1
		}
		// The pidfile names this very process: exec keeps the PID and its start time.
		if err := WritePidfile(*pidfile, os.Getpid()); err != nil {
			fmt.Fprintln(stderr, "agent run:", err)
			return 1
		}
		argv := append([]string{os.Args[0]}, fs.Args()...)
		err = syscall.Exec(exe, argv, append(os.Environ(), env...))
		os.Remove(*pidfile)
		fmt.Fprintf(stderr, "agent run: exec %s: %v\n", exe, err)
		return 1
	case "signal":
		fs := flag.NewFlagSet("agent signal", flag.ContinueOnError)
		fs.SetOutput(stderr)
		pidfile := fs.String("pidfile", "", "pidfile written by `agent run` (required)")
		name := fs.String("signal", "TERM", "TERM, KILL or INT")
		wait := fs.Duration("wait", 0, "how long to wait for the pidfile to appear")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		sig, ok := signals[strings.TrimPrefix(strings.ToUpper(*name), "SIG")]
		if *pidfile == "" || !ok || fs.NArg() != 0 {
			fmt.Fprintln(stderr, "usage: spanperf agent signal --pidfile FILE --signal TERM|KILL|INT [--wait D]")
			return 2
		}
		if err := SignalPidfile(*pidfile, sig, *wait); err != nil {
			fmt.Fprintln(stderr, "agent signal:", err)
			if errors.Is(err, ErrNotRunning) {
				return SignalNotRunning
			}
			return 1
		}
		return SignalSent
	}
	return 2
}
