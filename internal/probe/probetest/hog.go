// Package probetest starts known CPU loads for the probe's known-answer
// tests: a hog that is no part of the run (foreign CPU).
package probetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// HogEnv makes the test binary act as a hog (see RunIfHog): its value is
// the duty cycle, the share of one CPU it spins.
const HogEnv = "SPANPERF_PROBETEST_HOG"

// HogLifetime bounds a hog: it exits on its own after this long.
const HogLifetime = 90 * time.Second

// RunIfHog makes the test binary a hog when StartHog started it, and
// returns otherwise. Call it first in TestMain.
func RunIfHog() {
	v := os.Getenv(HogEnv)
	if v == "" {
		return
	}
	duty, err := strconv.ParseFloat(v, 64)
	if err != nil || duty <= 0 || duty >= 1 {
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	// Every 10 ms period: spin duty×10 ms of this thread's CPU, then sleep
	// the rest of the period.
	const period = 10 * time.Millisecond
	spin := time.Duration(duty * float64(period))
	for end := time.Now().Add(HogLifetime); time.Now().Before(end); {
		t0 := time.Now()
		c0 := threadCPU()
		for threadCPU()-c0 < spin {
		}
		if rest := period - time.Since(t0); rest > 0 {
			time.Sleep(rest)
		}
	}
	os.Exit(0)
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// Hog is a running hog.
type Hog struct {
	// PID is the hog's process ID.
	PID   int
	start string
}

// StartHog starts the test binary as a hog spinning duty of one CPU, in
// this process's network namespace but not as its descendant (sh starts it
// in the background and exits, so init adopts it), and kills it in
// t.Cleanup. The test binary's TestMain must call RunIfHog.
func StartHog(t *testing.T, duty float64) *Hog {
	t.Helper()
	return startHog(t, duty, `"$0" </dev/null >/dev/null 2>&1 & echo $!`)
}

// StartChildHog is StartHog, but the hog is a child of this process (sh
// execs it and its PID is printed first).
func StartChildHog(t *testing.T, duty float64) *Hog {
	t.Helper()
	return startHog(t, duty, `echo $$; exec "$0" </dev/null >/dev/null 2>&1`)
}

func startHog(t *testing.T, duty float64, script string) *Hog {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script, exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%g", HogEnv, duty))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start hog: %v", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("start hog: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("start hog: pid %q: %v", line, err)
	}
	h := &Hog{PID: pid}
	f, err := statFields(pid)
	if err != nil {
		t.Fatalf("hog %d: %v", pid, err)
	}
	h.start = f[19] // field 22, start time
	t.Cleanup(func() {
		// Only the hog: a PID reused since has another start time.
		if f, err := statFields(pid); err == nil && f[19] == h.start {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Wait() // sh, or the hog it became
		for i := 0; i < 100; i++ {
			if f, err := statFields(pid); err != nil || f[19] != h.start || f[0] == "Z" {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return h
}

// CPUSeconds is the hog's user+system CPU since it started.
func (h *Hog) CPUSeconds(t *testing.T) float64 {
	t.Helper()
	f, err := statFields(h.PID)
	if err != nil || f[19] != h.start {
		t.Fatalf("hog %d gone: %v", h.PID, err)
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return float64(u+s) / userHZ(t)
}

// userHZ is the tick rate of /proc's CPU times, as getconf reports it.
func userHZ(t *testing.T) float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Fatalf("getconf CLK_TCK: %v", err)
	}
	hz, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || hz <= 0 {
		t.Fatalf("getconf CLK_TCK: %q", out)
	}
	return hz
}

// statFields returns the fields of /proc/PID/stat after the command name:
// [0] is field 3 (state).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}
