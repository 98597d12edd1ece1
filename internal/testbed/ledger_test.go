package testbed_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// TestAliveZombie: a process that has died but is not yet reaped (what an
// orphan of `spanperf up` is until PID 1 reaps it) is not alive, so
// `spanperf down` need not wait for the reaping.
func TestAliveZombie(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	start, err := testbed.ProcStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !testbed.Alive(pid, start) {
		t.Fatal("a running process is not alive")
	}
	if testbed.Alive(pid, start+1) {
		t.Error("a process with another start time is alive")
	}
	cmd.Process.Kill()
	// Not waited for: the child stays a zombie until cmd.Wait.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nState:\tZ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not become a zombie:\n%s", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if testbed.Alive(pid, start) {
		t.Error("a zombie is alive")
	}
}
