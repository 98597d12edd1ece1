package agent

import (
	"errors"
	"net"
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

// TestRunProgUser: `agent run --prog P --user U` becomes U and execs P
// from PATH in its own place (the pidfile's PID is P's); a program not in
// PATH exits RunNotFound and an unknown user RunNoUser, naming them.
func TestRunProgUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	pidfile := filepath.Join(dir, "p.pid")
	cmd := agentCmd(t, "run", "--pidfile", pidfile, "--user", "nobody", "--prog", "id", "--", "-u")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "65534" {
		t.Fatalf("id -u as nobody: %q, %v, want 65534", out, err)
	}
	if b, err := os.ReadFile(pidfile); err != nil || strings.Fields(string(b))[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("pidfile %q (%v), want pid %d", b, err, cmd.Process.Pid)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--prog", "no-such-program-x"}, RunNotFound, "no-such-program-x: not found"},
		{[]string{"--user", "no-such-user-x", "--prog", "id"}, RunNoUser, "user no-such-user-x: not in /etc/passwd"},
	} {
		cmd := agentCmd(t, append([]string{"run", "--pidfile", filepath.Join(dir, "q.pid")}, c.args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v %q, want exit %d with %q", c.args, err, out, c.code, c.want)
		}
	}
}

// TestWriteCatRm: `agent write` puts stdin (or --from) at a path, making
// its directories, with the mode and owner asked for; `agent cat` gives
// a file back, or a directory's files in name order; `agent rm` removes
// a tree under /tmp and refuses any other.
func TestWriteCatRm(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "spanperf-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "a", "b", "2")
	w := agentCmd(t, "write", "--mode", "0600", f)
	w.Stdin = strings.NewReader("two\n")
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("write: %v %s", err, out)
	}
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written file: %v, mode %v, want 0600", err, fi.Mode())
	}
	if out, err := agentCmd(t, "write", "--from", f, filepath.Join(dir, "a", "b", "1")).CombinedOutput(); err != nil {
		t.Fatalf("write --from: %v %s", err, out)
	}
	if os.Geteuid() == 0 {
		g := filepath.Join(dir, "n", "x")
		if out, err := agentCmd(t, "write", "--user", "nobody", g).CombinedOutput(); err != nil {
			t.Fatalf("write --user: %v %s", err, out)
		}
		for _, p := range []string{g, filepath.Dir(g)} {
			if fi, err := os.Stat(p); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
				t.Errorf("%s: not nobody's (%v)", p, err)
			}
		}
	}
	out, err := agentCmd(t, "cat", filepath.Join(dir, "a", "b")).Output()
	if err != nil || string(out) != "two\ntwo\n" {
		t.Errorf("cat dir: %q, %v", out, err)
	}
	if out, err := agentCmd(t, "rm", "/etc/../etc/hostname").CombinedOutput(); err == nil || !strings.Contains(string(out), "only under /tmp") {
		t.Errorf("rm outside /tmp: %v %s", err, out)
	}
	if out, err := agentCmd(t, "rm", filepath.Join(dir, "a")).CombinedOutput(); err != nil {
		t.Fatalf("rm: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("after rm: %v", err)
	}
}

// TestListening: `agent listening` succeeds once a socket listens on the
// port in its network namespace, and fails after --wait when none does.
func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if out, err := agentCmd(t, "listening", "--port", strconv.Itoa(port), "--wait", "2s").CombinedOutput(); err != nil {
		t.Fatalf("listening on %d: %v %s", port, err, out)
	}
	l.Close()
	if out, err := agentCmd(t, "listening", "--port", strconv.Itoa(port), "--wait", "100ms").CombinedOutput(); err == nil || !strings.Contains(string(out), "nothing listens") {
		t.Errorf("after close: %v %s", err, out)
	}
}

// TestCgroupCPU reads cgroup v2's cpu.stat and v1's cpuacct.usage, as a
// container sees its own cgroup at /sys/fs/cgroup, and says so when
// there is neither.
func TestCgroupCPU(t *testing.T) {
	v2, v1 := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(v2, "cpu.stat"), []byte("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n"), 0o644)
	os.Mkdir(filepath.Join(v1, "cpu,cpuacct"), 0o755)
	os.WriteFile(filepath.Join(v1, "cpu,cpuacct", "cpuacct.usage"), []byte("2250000000\n"), 0o644)
	for dir, want := range map[string]float64{v2: 1.5, v1: 2.25} {
		if got, err := CgroupCPU(dir); err != nil || got != want {
			t.Errorf("%s: %v, %v, want %v", dir, got, err, want)
		}
	}
	if _, err := CgroupCPU(t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither cpu.stat") {
		t.Errorf("empty: %v", err)
	}
}
