package cgroup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/roottest"
	"github.com/spanperf/spanperf/internal/testbed"
)

func TestParseMounts(t *testing.T) {
	for _, tc := range []struct {
		file  string
		v2cpu bool // the unified root's cgroup.controllers lists cpu
		want  layout
		err   string
	}{
		{file: "mounts-v1-separate", want: layout{{mount: "/sys/fs/cgroup/cpu", cpu: true}, {mount: "/sys/fs/cgroup/cpuacct", cpuacct: true}}},
		{file: "mounts-v1-combined", want: layout{{mount: "/sys/fs/cgroup/cpu,cpuacct", cpu: true, cpuacct: true}}},
		{file: "mounts-v1-escaped", want: layout{{mount: "/mnt/cg cpu", cpu: true, cpuacct: true}}},
		{file: "mounts-v2", v2cpu: true, want: layout{{mount: "/sys/fs/cgroup", v2: true, cpu: true, cpuacct: true}}},
		{file: "mounts-v2", err: "does not offer the cpu controller"},
		{file: "mounts-none", err: "no cgroup hierarchy"},
	} {
		f, err := os.Open(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseMounts(f, func(mount string) []string {
			if mount != unifiedRoot {
				t.Errorf("%s: asked for the controllers of %s", tc.file, mount)
			}
			if tc.v2cpu {
				return []string{"cpuset", "cpu", "io", "memory"}
			}
			return []string{"memory"}
		})
		f.Close()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrNotSupported) {
				t.Errorf("%s: error %v, want ErrNotSupported saying %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.file, got, err, tc.want)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	for path, ok := range map[string]bool{
		"spanperf-0a1b2c/relay@a": true,
		"spanperf-0a1b2c":         true,
		"":                        false,
		"/sys/fs/cgroup/cpu/x":    false,
		"a/../b":                  false,
		"../x":                    false,
		"a//b":                    false,
		".":                       false,
	} {
		if err := (Spec{Path: path}).Validate(); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok %v", path, err, ok)
		}
	}
}

func TestQuotaFor(t *testing.T) {
	for _, tc := range []struct {
		cores  float64
		period int64
		want   int64
	}{{0.5, 100000, 50000}, {0.25, 100000, 25000}, {2, 100000, 200000}, {1.5, 50000, 75000}, {0.01, 100000, 1000}} {
		if got, err := quotaFor(tc.cores, tc.period); err != nil || got != tc.want {
			t.Errorf("quotaFor(%v, %d) = %d, %v; want %d", tc.cores, tc.period, got, err, tc.want)
		}
	}
	if _, err := quotaFor(0.001, 100000); err == nil {
		t.Error("quota of 100 µs accepted")
	}
}

// requireCgroups needs root (roottest.Require) and skips t on a machine
// without a CPU cgroup hierarchy.
func requireCgroups(t *testing.T) layout {
	t.Helper()
	roottest.Require(t, "creates cgroups")
	l, err := detect()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("this machine has no CPU cgroups: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	return l
}

// runID returns a fresh run id with a ledger owned by this process, so that
// a `spanperf clean` of a concurrent test leaves this test's groups alone.
func runID(t *testing.T) (string, *testbed.Ledger) {
	t.Helper()
	var b [3]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	led, err := testbed.NewLedger(id, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Remove() })
	return id, led
}

// newGroup makes group name of run id and closes it when the test ends,
// checking that nothing of it is left.
func newGroup(t *testing.T, id string, led *testbed.Ledger, name string) *Cgroup {
	t.Helper()
	cg, err := New(Spec{Path: "spanperf-" + id + "/" + name, Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, d := range cg.Dirs() {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s left behind", d)
			}
		}
	})
	return cg
}

// start runs a shell command and kills it when the test ends.
func start(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

const busyLoop = "while :; do :; done"

// favour gives the run directory of cg a large CFS weight (v1 cpu.shares),
// so that other tests busy on the machine's two shared cores do not starve
// the group below what its quota allows: the known answers test the quota
// and the usage counter, not the machine's load.
func favour(t *testing.T, cg *Cgroup) {
	t.Helper()
	h, dir := cg.dir(func(h hierarchy) bool { return h.cpu })
	if h.v2 {
		return
	}
	if err := writeFile(filepath.Join(filepath.Dir(dir), "cpu.shares"), "65536"); err != nil {
		t.Fatal(err)
	}
}

// cores measures the CPU cg uses over d, in cores.
func cores(t *testing.T, cg *Cgroup, d time.Duration) float64 {
	t.Helper()
	u0, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(d)
	u1, err := cg.Usage()
	if err != nil {
		t.Fatal(err)
	}
	return (u1 - u0).Seconds() / time.Since(t0).Seconds()
}

// within measures cg's CPU over d until it lies in [lo, hi], trying twice at
// most: the machine's two cores are shared with other tests.
func within(t *testing.T, what string, cg *Cgroup, d time.Duration, lo, hi float64) float64 {
	t.Helper()
	var c float64
	for try := 0; try < 2; try++ {
		if c = cores(t, cg, d); c >= lo && c <= hi {
			t.Logf("%s: %.3f cores", what, c)
			return c
		}
		t.Logf("%s: %.3f cores, want %.2f..%.2f; measuring again", what, c, lo, hi)
	}
	t.Errorf("%s: %.3f cores, want %.2f..%.2f", what, c, lo, hi)
	return c
}

// A busy loop held to 0.5 CPU by the quota measures half a core through
// the group's usage; without the quota, more than 0.7.
func TestBusyLoopLimit(t *testing.T) {
	requireCgroups(t)
	id, led := runID(t)
	cg := newGroup(t, id, led, "busy")
	favour(t, cg)
	cmd := start(t, busyLoop)
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cg.SetCPULimit(0.5); err != nil {
		t.Fatal(err)
	}
	if got, err := cg.CPULimit(); err != nil || got != 0.5 {
		t.Errorf("CPULimit = %v, %v; want 0.5", got, err)
	}
	time.Sleep(200 * time.Millisecond) // past the period the quota was set in
	within(t, "limited to 0.5", cg, 2*time.Second, 0.45, 0.55)
	if err := cg.SetCPULimit(0); err != nil {
		t.Fatal(err)
	}
	if got, err := cg.CPULimit(); err != nil || got != 0 {
		t.Errorf("CPULimit after reset = %v, %v; want 0", got, err)
	}
	within(t, "unlimited", cg, 2*time.Second, 0.7, 1.1)
	if err := cg.SetCPULimit(-1); err == nil {
		t.Error("negative limit accepted")
	}
}

// An idle process charges its group (next to) nothing.
func TestIdleUsage(t *testing.T) {
	requireCgroups(t)
	id, led := runID(t)
	cg := newGroup(t, id, led, "idle")
	cmd := start(t, "sleep 60")
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if c := cores(t, cg, time.Second); c < 0 || c > 0.02 {
		t.Errorf("idle process: %.4f cores, want < 0.02", c)
	}
}

// Close moves what is still inside back to the root, unlimited, removes the
// group in every hierarchy and its run directory once the last group under
// it is gone, and does nothing the second time.
func TestCloseMovesOutAndRemoves(t *testing.T) {
	l := requireCgroups(t)
	id, led := runID(t)
	a, err := New(Spec{Path: "spanperf-" + id + "/a", Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Spec{Path: "spanperf-" + id + "/b", Ledger: led})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := New(Spec{Path: "spanperf-" + id + "/a", Ledger: led}); err == nil {
		t.Error("New of an existing group succeeded")
	}
	if len(a.Dirs()) != len(l) {
		t.Errorf("dirs %v, want one in each of %d hierarchies", a.Dirs(), len(l))
	}
	cmd := start(t, "sleep 60 & sleep 60 & wait")
	time.Sleep(100 * time.Millisecond)
	if err := a.AddTree(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCPULimit(0.3); err != nil {
		t.Fatal(err)
	}
	procs, err := a.Procs()
	if err != nil || len(procs) != 3 || !slices.Contains(procs, cmd.Process.Pid) {
		t.Errorf("procs %v, %v: want the shell and its two sleeps", procs, err)
	}
	for _, d := range a.Dirs() {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err != nil || len(strings.Fields(string(b))) != 3 {
			t.Errorf("%s holds %q, %v: want 3 processes", d, b, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	for _, d := range a.Dirs() {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind", d)
		}
	}
	if err := a.Add(cmd.Process.Pid); err == nil {
		t.Error("Add after Close succeeded")
	}
	if p := cmd.ProcessState; p != nil {
		t.Fatal("the process died with its group")
	}
	moved, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	for _, line := range strings.Split(string(moved), "\n") {
		if strings.Contains(line, "spanperf-") {
			t.Errorf("after close the process is still in %s", line)
		}
	}
	for _, h := range l {
		top := filepath.Join(h.mount, "spanperf-"+id)
		if _, err := os.Stat(top); err != nil {
			t.Errorf("%s removed while b still uses it: %v", top, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range l {
		top := filepath.Join(h.mount, "spanperf-"+id)
		if _, err := os.Stat(top); err == nil {
			t.Errorf("%s left behind after the last group closed", top)
		}
	}
	ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, id+".ledger"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range ents {
		if e.Kind == testbed.KindCgroup {
			paths = append(paths, e.Path)
		}
	}
	for _, h := range l {
		for _, want := range []string{"spanperf-" + id, "spanperf-" + id + "/a", "spanperf-" + id + "/b"} {
			if !slices.Contains(paths, filepath.Join(h.mount, want)) {
				t.Errorf("ledger lacks %s (has %v)", filepath.Join(h.mount, want), paths)
			}
		}
	}
}

// The v2 code path, on the unified hierarchy that a hybrid machine mounts
// at /sys/fs/cgroup/unified. That hierarchy holds no CPU controller (v1 has
// it), so only what needs none is exercised: create, add, usage from
// cpu.stat, close; a limit says it is not supported.
func TestV2WithoutCPUController(t *testing.T) {
	requireCgroups(t)
	const mount = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err != nil {
		t.Skipf("no cgroup2 hierarchy at %s", mount)
	}
	id, led := runID(t)
	cg, err := newIn(Spec{Path: "spanperf-" + id + "/busy", Ledger: led}, layout{{mount: mount, v2: true, cpu: true, cpuacct: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cg.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := os.Stat(filepath.Join(mount, "spanperf-"+id)); err == nil {
			t.Errorf("v2 group left behind")
		}
	}()
	cmd := start(t, busyLoop)
	if err := cg.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if c := cores(t, cg, 500*time.Millisecond); c < 0.2 {
		t.Errorf("busy loop in a v2 group: %.3f cores from cpu.stat, want > 0.2", c)
	}
	if err := cg.SetCPULimit(0.5); !errors.Is(err, ErrNotSupported) {
		t.Errorf("limit without the v2 cpu controller: %v, want ErrNotSupported", err)
	}
}
