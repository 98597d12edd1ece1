package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
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

// Exit statuses of `agent run` that fail before the exec.
const (
	// RunNotFound: the program is not in PATH (127, as a shell's).
	RunNotFound = 127
	// RunNoUser: the user is not in /etc/passwd, or cannot be become.
	RunNoUser = 126
)

// runArgv is what `agent run` execs: prog looked up in PATH with args,
// or, when prog is "", this binary with args.
func runArgv(prog string, args []string) (exe string, argv []string, err error) {
	if prog == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", nil, err
		}
		return exe, append([]string{os.Args[0]}, args...), nil
	}
	exe, err = exec.LookPath(prog)
	if err != nil {
		return "", nil, fmt.Errorf("%s: not found (PATH=%s)", prog, os.Getenv("PATH"))
	}
	return exe, append([]string{prog}, args...), nil
}

// lookupUser returns name's user and group IDs from /etc/passwd.
func lookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("user %s: not in /etc/passwd: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %s: bad uid %q or gid %q", name, u.Uid, u.Gid)
	}
	return uid, gid, nil
}

// becomeUser drops to name's user and group (and no others), for
// programs that refuse to run as root (PostgreSQL).
func becomeUser(name string) error {
	uid, gid, err := lookupUser(name)
	if err != nil {
		return err
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("user %s: setgroups: %w", name, err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("user %s: setgid %d: %w", name, gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("user %s: setuid %d: %w", name, uid, err)
	}
	return nil
}

// WriteFile writes what r holds to path with mode perm, making its
// missing parent directories (0755); with owner set, the file and the
// directories it made belong to that user (from /etc/passwd). A pod
// site's programs read the files they need from where `agent write`
// put them, since their image has no shell.
func WriteFile(path string, r io.Reader, perm os.FileMode, owner string) error {
	uid, gid := -1, -1
	if owner != "" {
		var err error
		if uid, gid, err = lookupUser(owner); err != nil {
			return err
		}
	}
	var made []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == "/" {
			break
		}
		made = append(made, d)
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := os.Mkdir(made[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if uid >= 0 {
			if err := os.Chown(made[i], uid, gid); err != nil {
				return err
			}
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(path, perm)
	}
	if err == nil && uid >= 0 {
		err = os.Chown(path, uid, gid)
	}
	return err
}

// CgroupCPU returns the CPU seconds (user and system) used so far by the
// processes of the cgroup mounted at root as a container sees its own:
// cgroup v2's cpu.stat usage_usec, or v1's cpuacct.usage.
func CgroupCPU(root string) (float64, error) {
	if b, err := os.ReadFile(filepath.Join(root, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("cpu.stat: %w", err)
				}
				return float64(us) / 1e6, nil
			}
		}
	}
	for _, d := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		b, err := os.ReadFile(filepath.Join(root, d, "cpuacct.usage"))
		if err != nil {
			continue
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpuacct.usage: %w", err)
		}
		return float64(ns) / 1e9, nil
	}
	return 0, fmt.Errorf("%s: neither cpu.stat (v2) nor cpuacct/cpuacct.usage (v1)", root)
}

// Cat writes the file at path to w; a directory, each of its files in
// name order (not those below it).
func Cat(w io.Writer, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	files := []string{path}
	if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		files = files[:0]
		for _, e := range ents {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Listening reports whether the network namespace whose /proc/PID/net
// is dir (/proc/self/net: this process's) has a TCP socket in state
// LISTEN on port.
func Listening(dir string, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			cols := strings.Fields(line)
			if len(cols) > 3 && strings.HasSuffix(cols[1], want) && cols[3] == "0A" {
				return true
			}
		}
	}
	return false
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

// podMain runs the subcommands sleep, run, write, cat, rm, cpu, listening and signal
// (see Main).
func podMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
		prog := fs.String("prog", "", "program to exec, looked up in PATH (default: spanperf itself)")
		as := fs.String("user", "", "user (from /etc/passwd) to become before the exec")
		var env envList
		fs.Var(&env, "env", "KEY=VALUE added to the environment (repeatable)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if *pidfile == "" || (fs.NArg() == 0 && *prog == "") {
			fmt.Fprintln(stderr, "usage: spanperf agent run --pidfile FILE [--prog PROGRAM] [--user NAME] [--env K=V]... -- ARGS...")
			return 2
		}
		exe, argv, err := runArgv(*prog, fs.Args())
		if err != nil {
			fmt.Fprintln(stderr, "agent run:", err)
			return RunNotFound
		}
		// The pidfile names this very process: exec keeps the PID and its
		// start time. It is written before the change of user, which may
		// not be allowed to write there.
		if err := WritePidfile(*pidfile, os.Getpid()); err != nil {
			fmt.Fprintln(stderr, "agent run:", err)
			return 1
		}
		if *as != "" {
			if err := becomeUser(*as); err != nil {
				os.Remove(*pidfile)
				fmt.Fprintln(stderr, "agent run:", err)
				return RunNoUser
			}
		}
		err = syscall.Exec(exe, argv, append(os.Environ(), env...))
		os.Remove(*pidfile)
		fmt.Fprintf(stderr, "agent run: exec %s: %v\n", exe, err)
		return 1
	case "write":
		fs := flag.NewFlagSet("agent write", flag.ContinueOnError)
		fs.SetOutput(stderr)
		mode := fs.Uint("mode", 0o644, "the file's permissions")
		as := fs.String("user", "", "user (from /etc/passwd) to own the file and the directories made for it")
		from := fs.String("from", "", "file to copy (default: stdin)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if fs.NArg() != 1 || !filepath.IsAbs(fs.Arg(0)) {
			fmt.Fprintln(stderr, "usage: spanperf agent write [--mode M] [--user NAME] [--from FILE] /PATH < CONTENT")
			return 2
		}
		if *from != "" {
			f, err := os.Open(*from)
			if err != nil {
				fmt.Fprintln(stderr, "agent write:", err)
				return 1
			}
			defer f.Close()
			stdin = f
		}
		if err := WriteFile(fs.Arg(0), stdin, os.FileMode(*mode), *as); err != nil {
			fmt.Fprintln(stderr, "agent write:", err)
			return 1
		}
		return 0
	case "cat", "rm":
		fs := flag.NewFlagSet("agent "+args[0], flag.ContinueOnError)
		fs.SetOutput(stderr)
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if fs.NArg() == 0 {
			fmt.Fprintf(stderr, "usage: spanperf agent %s /tmp/PATH...\n", args[0])
			return 2
		}
		for _, p := range fs.Args() {
			var err error
			if args[0] == "cat" {
				err = Cat(stdout, p)
			} else if p = filepath.Clean(p); !strings.HasPrefix(p, "/tmp/") {
				err = fmt.Errorf("%s: removes only under /tmp", p)
			} else {
				err = os.RemoveAll(p)
			}
			if err != nil {
				fmt.Fprintf(stderr, "agent %s: %v\n", args[0], err)
				return 1
			}
		}
		return 0
	case "cpu":
		if len(args) != 1 {
			fmt.Fprintln(stderr, "usage: spanperf agent cpu")
			return 2
		}
		secs, err := CgroupCPU("/sys/fs/cgroup")
		if err != nil {
			fmt.Fprintln(stderr, "agent cpu:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%.9f\n", secs)
		return 0
	case "listening":
		fs := flag.NewFlagSet("agent listening", flag.ContinueOnError)
		fs.SetOutput(stderr)
		port := fs.Int("port", 0, "TCP port (required)")
		wait := fs.Duration("wait", 0, "how long to wait for a listener")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if *port <= 0 || *port > 65535 || fs.NArg() != 0 {
			fmt.Fprintln(stderr, "usage: spanperf agent listening --port P [--wait D]")
			return 2
		}
		deadline := time.Now().Add(*wait)
		for !Listening("/proc/self/net", *port) {
			if !time.Now().Before(deadline) {
				fmt.Fprintf(stderr, "agent listening: nothing listens on port %d after %v\n", *port, *wait)
				return 1
			}
			time.Sleep(20 * time.Millisecond)
		}
		return 0
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
