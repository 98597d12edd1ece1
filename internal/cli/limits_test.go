package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// SIGINT in the middle of a trial under a CPU limit: the run's cgroups go
// with the rest of its testbed.
func TestInterruptRemovesCgroups(t *testing.T) {
	requireRoot(t)
	datapathtest.New(t, "wireguard", nil) // skips where wireguard cannot run
	cmd, e, groups := startLimited(t)
	time.Sleep(time.Second) // into the trial
	// On cgroup v1 the trial's quota is in force: 0.5 or 1 CPU per 100 ms.
	quotas, _ := filepath.Glob("/sys/fs/cgroup/cpu/" + filepath.Base(groups[0]) + "/wireguard-go@*/cpu.cfs_quota_us")
	for _, q := range quotas {
		b, _ := os.ReadFile(q)
		if v := strings.TrimSpace(string(b)); v != "50000" && v != "100000" {
			t.Errorf("%s = %s during the trial, want 50000 or 100000", q, v)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil && len(quotas) != 2 {
		t.Errorf("%d wireguard-go quotas under %s, want 2", len(quotas), groups[0])
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit after SIGINT: %v, want status 130\n%s", err, e.String())
	}
	for _, d := range groups {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind after SIGINT", d)
		}
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind after SIGINT: %v", r)
	}
}

// startLimited starts the binary on a wireguard scenario with CPU limits
// and waits until its wireguard-go processes are in their cgroups; it
// returns the run's top-level cgroup directories.
func startLimited(t *testing.T) (*exec.Cmd, *bytes.Buffer, []string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	src := `name: limits
datapaths: [wireguard]
workloads:
  - type: stream
limits:
  tunnel: {cpu: [0.5, 1]}
repetitions: 1
duration: 20s
warmup: 0s
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-f", p, "--out", filepath.Join(t.TempDir(), "run"))
	e := new(bytes.Buffer)
	cmd.Stderr = e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child's cgroups: those whose run's ledger it owns.
	var groups []string
	deadline := time.Now().Add(60 * time.Second)
	for len(groups) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/spanperf-*")
		for _, d := range dirs {
			run := netns.RunOf(filepath.Base(d))
			ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, run+".ledger"))
			if err != nil || len(ents) == 0 || ents[0].Owner != cmd.Process.Pid {
				continue
			}
			if sub, _ := filepath.Glob(filepath.Join(d, "wireguard-go@*")); len(sub) > 0 {
				groups = append(groups, d)
			}
		}
	}
	if len(groups) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no wireguard-go cgroup within 60 s:\n%s", e.String())
	}
	return cmd, e, groups
}

// SIGKILL leaves the run's cgroups behind with its testbed; `spanperf
// clean` finds them through the run's ledger and removes them.
func TestKillThenCleanRemovesCgroups(t *testing.T) {
	requireRoot(t)
	datapathtest.New(t, "wireguard", nil)
	cmd, _, groups := startLimited(t)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, d := range groups {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s gone before clean: %v", d, err)
		}
	}
	out, errOut, code := spanperf(t, "clean")
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	for _, d := range groups {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind after clean:\n%s", d, out)
		}
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind after SIGKILL and clean: %v\nclean said:\n%s", r, out)
	}
}

// TestBaselineBesideLimits: a relay limit beside a native baseline. Native
// has no relay, so it runs the point once, unlimited, and succeeds (before,
// each of its trials took every limit value and failed); mtls-relay runs
// every limit. The summary compares each limited point with the unlimited
// baseline, and the sizing table has the relay's limits only.
func TestBaselineBesideLimits(t *testing.T) {
	requireRoot(t)
	p := filepath.Join(t.TempDir(), "s.yaml")
	src := `name: beside
datapaths: [native, mtls-relay]
limits: {relay: {cpu: [0.5, 1]}}
workloads:
  - {type: rr, concurrency: 2, rate: 500}
repetitions: 1
duration: 500ms
warmup: 0s
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	out, errOut, code := spanperf(t, "run", "-f", p, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range recs {
		n[r.Datapath]++
		if r.Error != "" {
			t.Errorf("%s failed: %s", r.TrialKey(), r.Error)
		}
		if _, limited := r.Params[results.CPULimitParam("relay")]; limited != (r.Datapath == "mtls-relay") {
			t.Errorf("%s: limited %v", r.TrialKey(), limited)
		}
	}
	if n["native"] != 1 || n["mtls-relay"] != 2 {
		t.Errorf("trials %v, want native 1, mtls-relay 2", n)
	}
	for _, want := range []string{"limit.relay.cpu=0.5", "limit.relay.cpu=1", "native (no limit)", "sizing: mtls-relay rr", "relay 0.5", "relay 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sizing: native") {
		t.Errorf("a sizing table for the unlimited baseline:\n%s", out)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
}
