package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the tests start this binary as the agent (`BINARY agent ...`).
func TestMain(m *testing.M) {
	RunIfChild()
	os.Exit(m.Run())
}

// agentCmd is `THIS-BINARY agent ARGS...`, as a pod site runs /spanperf.
func agentCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(exe, append([]string{"agent"}, args...)...)
}

// waitExit waits up to 10 s for cmd to exit.
func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v: still running after 10s", cmd.Args)
		return nil
	}
}

func TestSleepEndsOnTerm(t *testing.T) {
	cmd := agentCmd(t, "sleep")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the signal handler is installed
	cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(t, cmd); err != nil {
		t.Fatalf("sleep after SIGTERM: %v, want exit 0", err)
	}
}

// TestRunPidfileSignal: `agent run` writes its own PID (kept across the exec
// into the command) and `agent signal` stops that process; a second signal
// finds it gone (exit 3), as does one with no pidfile.
func TestRunPidfileSignal(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "p.pid")
	for _, sig := range []string{"TERM", "KILL"} {
		os.Remove(pidfile)
		cmd := agentCmd(t, "run", "--pidfile", pidfile, "--env", "SPANPERF_X=1", "--", "agent", "sleep")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := agentCmd(t, "signal", "--pidfile", pidfile, "--signal", sig, "--wait", "5s")
		// The pidfile appears before exec, the handler a little after:
		// give sleep time to install it so TERM ends it cleanly.
		time.Sleep(300 * time.Millisecond)
		b, err := os.ReadFile(pidfile)
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(b)); len(f) != 2 || f[0] != strconv.Itoa(cmd.Process.Pid) {
			t.Fatalf("pidfile %q, want the pid %d and a start time", b, cmd.Process.Pid)
		}
		if out, err := sc.CombinedOutput(); err != nil {
			t.Fatalf("signal %s: %v: %s", sig, err, out)
		}
		err = waitExit(t, cmd)
		var ee *exec.ExitError
		switch sig {
		case "TERM":
			if err != nil {
				t.Fatalf("after TERM: %v, want exit 0", err)
			}
		case "KILL":
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("after KILL: %v, want killed", err)
			}
		}
		again := agentCmd(t, "signal", "--pidfile", pidfile, "--signal", "KILL")
		out, err := again.CombinedOutput()
		if !errors.As(err, &ee) || ee.ExitCode() != SignalNotRunning || !strings.Contains(string(out), "not running") {
			t.Fatalf("signal after exit: %v %s, want exit %d not running", err, out, SignalNotRunning)
		}
	}
	t0 := time.Now()
	err := SignalPidfile(filepath.Join(t.TempDir(), "none.pid"), syscall.SIGTERM, 100*time.Millisecond)
	if !errors.Is(err, ErrNotRunning) || time.Since(t0) > 2*time.Second {
		t.Fatalf("no pidfile: %v after %v, want ErrNotRunning after about 100ms", err, time.Since(t0))
	}
}

func TestPodSubcommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--", "agent", "sleep"},                 // no pidfile
		{"run", "--pidfile", "/nonexistent/x"},          // no command
		{"signal", "--pidfile", "x", "--signal", "HUP"}, // not a signal it sends
		{"sleep", "extra"},
	} {
		var out strings.Builder
		if got := Main(args, &out, &out); got != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, got)
		}
	}
}
