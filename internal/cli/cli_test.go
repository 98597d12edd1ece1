package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/cli"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/roottest"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var bin string // the spanperf binary, built once

func TestMain(m *testing.M) {
	// In-process runs start agents with this test binary (os.Executable).
	agent.RunIfChild()
	dir, err := os.MkdirTemp("", "clitest-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "spanperf")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/spanperf").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	roottest.Require(t, "creates network namespaces")
}

// scenario writes a small scenario: native and vxlan, stream and rr, two reps.
func scenario(t *testing.T, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	src := `name: clitest
datapaths: [native, vxlan]
workloads:
  - type: stream
    message_size: 65536
  - type: rr
    concurrency: [1, 2]
repetitions: 2
duration: 500ms
warmup: 100ms
` + extra
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func spanperf(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.Main(args, &o, &e)
	return o.String(), e.String(), code
}

// residue lists spanperf namespaces, ledgers, agent processes and cgroups
// left on the machine, except those of runs whose owner is another live
// process (tests of other packages run at the same time). Items are listed
// before ledgers are read, so a run that starts in between is recognised.
func residue(t *testing.T) []string {
	t.Helper()
	var items []string
	items = append(items, netns.ListNamed()...)
	ledgers, _ := filepath.Glob(filepath.Join(testbed.LedgerDir, "*.ledger"))
	items = append(items, ledgers...)
	cg, _ := filepath.Glob("/sys/fs/cgroup/*/spanperf-*")
	items = append(items, cg...)
	// Temp dirs named after a run: the testbed's and the workloads'
	// (spanperf-RUN-nginx-*, -pgbench-*, ...).
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), "spanperf-*"))
	for _, d := range tmps {
		if netns.RunOf(filepath.Base(d)) != "" {
			items = append(items, d)
		}
	}
	others := func(item string) bool {
		run := netns.RunOf(filepath.Base(item))
		if strings.HasSuffix(item, ".ledger") {
			run = strings.TrimSuffix(filepath.Base(item), ".ledger")
		}
		ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, run+".ledger"))
		return err == nil && len(ents) > 0 && ents[0].Owner != os.Getpid() && testbed.Alive(ents[0].Owner, ents[0].OwnerStart)
	}
	var out []string
	for _, it := range items {
		if !others(it) {
			out = append(out, it)
		}
	}
	for _, pid := range agents(t) {
		out = append(out, "process "+strconv.Itoa(pid))
	}
	return out
}

// agents lists the agent processes of this test's runs: those whose
// executable is the spanperf binary built for this test (runs started as a
// child process) or this very test binary (runs through cli.Main, whose
// agents are this binary re-executed as `agent`, see agent.Command). Other
// packages' and other checkouts' agents run other executables.
func agents(t *testing.T) []int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{bin: true, self: true}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
		if err != nil || !ours[strings.TrimSuffix(exe, " (deleted)")] {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if args := strings.Split(string(cmd), "\x00"); err == nil && len(args) > 1 && args[1] == "agent" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestResidueSeesAgents: residue lists an agent that this test binary runs
// as itself, the way runs through cli.Main start them, as well as one of
// the spanperf binary; it used to see only the latter.
func TestResidueSeesAgents(t *testing.T) {
	self := agent.Command("agent-server", "serve", "--listen", "127.0.0.1:0")
	for _, cmd := range []*exec.Cmd{
		exec.Command(self.Path, self.Args...),
		exec.Command(bin, "agent", "serve", "--listen", "127.0.0.1:0"),
	} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		want := "process " + strconv.Itoa(cmd.Process.Pid)
		found := false
		for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			found = slices.Contains(residue(t), want) // once it has exec'd
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !found {
			t.Errorf("residue does not list the agent %s (%s)", want, cmd.Path)
		}
		if slices.Contains(residue(t), want) {
			t.Errorf("residue lists %s after it ended", want)
		}
	}
}

func TestRunWritesRecordsAndSummary(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "run")
	out, errOut, code := spanperf(t, "run", "-f", scenario(t, ""), "--out", dir, "--seed", "7")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 12 { // 2 datapaths × 3 points × 2 reps
		t.Fatalf("%d records, want 12", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("trial %d failed: %s", r.Trial, r.Error)
		}
		seen[r.TrialKey()] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct trials, want 12", len(seen))
	}
	// Datapaths interleave: the first rep of both runs before the second rep of either.
	if recs[0].Rep != 0 || recs[len(recs)-1].Rep != 1 || recs[5].Rep != 0 || recs[6].Rep != 1 {
		t.Errorf("reps not in order: first %d, sixth %d, seventh %d", recs[0].Rep, recs[5].Rep, recs[6].Rep)
	}
	var m results.Manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.End.IsZero() || m.Host.Kernel == "" || m.Host.Cores == 0 || m.Seed != 7 || m.Trials != 12 {
		t.Errorf("manifest incomplete: %+v", m)
	}
	for _, want := range []string{"stream", "rr", "native", "vxlan", "throughput_bps", "Δ"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "[12/12]") || !strings.Contains(errOut, "ETA") {
		t.Errorf("no progress lines:\n%s", errOut)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
	// The same plan from the same seed: resuming a finished run runs nothing.
	_, errOut, code = spanperf(t, "run", "--resume", dir)
	if code != 0 || !strings.Contains(errOut, "12 recorded already") {
		t.Errorf("resume of a finished run: exit %d\n%s", code, errOut)
	}
	if recs2, _ := results.Load(dir); len(recs2) != 12 {
		t.Errorf("resume added records: %d", len(recs2))
	}
}

// startRun starts the binary on a scenario and waits until n trials are recorded.
func startRun(t *testing.T, dir string, n int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "run", "-f", scenario(t, ""), "--out", dir, "--seed", "3")
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if recs, _ := results.Load(dir); len(recs) >= n {
			time.Sleep(300 * time.Millisecond) // into the next trial
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatalf("no %d records after 60 s:\n%s", n, e.String())
	return nil
}

func TestInterruptKeepsRecordsAndCleansUp(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := startRun(t, dir, 2)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit after SIGINT: %v, want status 130", err)
	}
	recs, _ := results.Load(dir)
	if len(recs) < 2 || len(recs) >= 12 {
		t.Fatalf("%d records after interrupt, want 2..11", len(recs))
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind after SIGINT: %v", r)
	}
	// Resume finishes the plan without repeating a recorded trial.
	_, errOut, code := spanperf(t, "run", "--resume", dir)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	all, _ := results.Load(dir)
	keys := map[string]bool{}
	for _, r := range all {
		if keys[r.TrialKey()] {
			t.Errorf("trial %s recorded twice", r.TrialKey())
		}
		keys[r.TrialKey()] = true
	}
	if len(all) != 12 {
		t.Errorf("%d records after resume, want 12", len(all))
	}
}

// TestKillThenClean kills a run while its testbed is up: clean must sweep
// what it left. A kill that left nothing of the run tested nothing, and
// fails.
func TestKillThenClean(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := startRun(t, dir, 1)
	// Wait for the next trial's testbed: a ledger this run owns, and the
	// namespaces it lists.
	tb := ""
	for deadline := time.Now().Add(30 * time.Second); tb == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ledgers, _ := filepath.Glob(filepath.Join(testbed.LedgerDir, "*.ledger"))
		for _, l := range ledgers {
			id := strings.TrimSuffix(filepath.Base(l), ".ledger")
			ents, err := testbed.ReadLedger(l)
			if err == nil && len(ents) > 0 && ents[0].Owner == cmd.Process.Pid && slices.ContainsFunc(netns.ListNamed(), func(ns string) bool { return netns.RunOf(ns) == id }) {
				tb = id
			}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !slices.ContainsFunc(residue(t), func(it string) bool { return tb != "" && netns.RunOf(it) == tb }) {
		t.Fatalf("the run left no testbed after SIGKILL (testbed seen up: %q): the kill came too late to test clean", tb)
	}
	out, errOut, code := spanperf(t, "clean")
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind after SIGKILL and clean: %v\nclean said:\n%s", r, out)
	}
	if recs, _ := results.Load(dir); len(recs) < 1 {
		t.Errorf("records lost: %d", len(recs))
	}
}

func TestBadScenarioNamesFileLineKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(p, []byte("name: x\ndatapaths: [native, warp]\nworkloads:\n  - type: stream\n    message_size: -5\n"), 0o644)
	_, errOut, code := spanperf(t, "run", "-f", p)
	if code == 0 {
		t.Fatal("bad scenario accepted")
	}
	for _, want := range []string{p + ":2:", "warp", p + ":5:", "message_size"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error lacks %q:\n%s", want, errOut)
		}
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("a rejected scenario built something: %v", r)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"run"}, {"run", "-f", "a", "--resume", "b"}, {"summary"}} {
		if _, _, code := spanperf(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestListAndDoctor(t *testing.T) {
	out, _, code := spanperf(t, "list")
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	for _, want := range []string{"native", "vxlan", "geneve", "stream", "rr", "crr", "message_size", "implementation"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q", want)
		}
	}
	requireRoot(t)
	out, errOut, code := spanperf(t, "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"testbed", "native", "vxlan", "ipsec implementation=libreswan"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
}

func TestUpDown(t *testing.T) {
	requireRoot(t)
	out, errOut, code := spanperf(t, "up", "-f", scenario(t, ""), "--datapath", "vxlan")
	if code != 0 {
		t.Fatalf("up: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "ip netns exec spanperf-") || !strings.Contains(out, "198.19.0.2:7100") {
		t.Errorf("up does not say how to enter the sites or reach the server:\n%s", out)
	}
	if len(netns.ListNamed()) < 3 {
		t.Errorf("up left no testbed: %v", netns.ListNamed())
	}
	// clean leaves a testbed that was left up on purpose.
	out2, _, _ := spanperf(t, "clean")
	if !strings.Contains(out2, "spanperf down") || len(netns.ListNamed()) < 3 {
		t.Errorf("clean removed an up testbed:\n%s", out2)
	}
	out, errOut, code = spanperf(t, "down")
	if code != 0 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errOut)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind after down: %v", r)
	}
}

// TestFailingDatapathIsRecordedAndRunGoesOn runs a datapath whose daemon
// fails to start beside native: its trials are recorded as failed, naming
// the datapath, the site and the daemon's own words, and native's trials
// still run.
func TestFailingDatapathIsRecordedAndRunGoesOn(t *testing.T) {
	requireRoot(t)
	p := filepath.Join(t.TempDir(), "broken.yaml")
	os.WriteFile(p, []byte(`name: broken
datapaths:
  - native
  - name: custom
    label: broken
    up: "echo relay refused to start >&2; exit 3"
    target: "{peer_addr}:{port}"
workloads:
  - type: rr
repetitions: 2
duration: 300ms
warmup: 0s
`), 0o644)
	dir := filepath.Join(t.TempDir(), "run")
	out, errOut, code := spanperf(t, "run", "-f", p, "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records (%v), want 4", len(recs), err)
	}
	for _, r := range recs {
		switch r.Datapath {
		case "native":
			if r.Error != "" || r.Metrics[results.TransactionsPerS] <= 0 {
				t.Errorf("native trial: error %q, metrics %v", r.Error, r.Metrics)
			}
		case "broken":
			for _, want := range []string{"custom", "site a", "relay refused to start"} {
				if !strings.Contains(r.Error, want) {
					t.Errorf("failed trial's error lacks %q: %s", want, r.Error)
				}
			}
		}
	}
	if !strings.Contains(out, "2 of 2 trials failed") {
		t.Errorf("summary does not flag the failed trials:\n%s", out)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
}

// upTestbed runs `spanperf up` through the binary, so that up exits as it
// does for a user, on examples/custom-socat.yaml with datapath label dp,
// and returns the testbed's ID and what up printed. A datapath this
// machine cannot run skips the test.
func upTestbed(t *testing.T, dp string) (id, out string) {
	t.Helper()
	return upScenario(t, "../../examples/custom-socat.yaml", dp)
}

// upScenario is upTestbed on scenario file file.
func upScenario(t *testing.T, file, dp string) (id, out string) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, "up", "-f", file, "--datapath", dp)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil && strings.Contains(e.String(), "not supported") {
		t.Skipf("%s cannot run here: %s", dp, strings.TrimSpace(e.String()))
	}
	if err != nil {
		t.Fatalf("up --datapath %s: %v\n%s%s", dp, err, o.String(), e.String())
	}
	f := strings.Fields(o.String())
	if len(f) < 2 || f[0] != "testbed" {
		t.Fatalf("up printed no testbed ID:\n%s", o.String())
	}
	return f[1], o.String()
}

// TestUpCarriesTraffic brings up a testbed with every datapath through the
// binary, which exits, then runs a short rr through it with the agent
// client command up printed, and takes it down: what up built keeps
// carrying traffic after up has exited, and down leaves nothing behind.
func TestUpCarriesTraffic(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("socat"); err != nil {
		t.Skip("socat not installed (Debian package socat): the custom datapath's relay")
	}
	for _, d := range plugins.Datapaths() {
		if d.Kube {
			continue // up builds local testbeds only (TestUpRefusesKube)
		}
		label := d.Name
		if d.Name == "custom" {
			label = "socat" // examples/custom-socat.yaml's label
		}
		t.Run(d.Name, func(t *testing.T) {
			id, out := upTestbed(t, label)
			down := func() {
				if o, e, code := spanperf(t, "down", "--run", id); code != 0 {
					t.Errorf("down: exit %d\n%s%s", code, o, e)
				}
			}
			defer down()
			upClient(t, id, out, "300ms")
			down()
			down = func() {}
			if r := residueOf(t, id); len(r) > 0 {
				t.Errorf("left behind after down: %v", r)
			}
		})
	}
}

// upClient runs, for the duration d, the rr client command that up
// printed (output out, testbed id) for site a (or its pod, where the
// datapath runs workloads in pods: flannel-*), and returns its result,
// which must have transactions.
func upClient(t *testing.T, id, out, d string) agent.Result {
	t.Helper()
	var client []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[0] == "ip" && (f[3] == "spanperf-"+id+"-a" || f[3] == "spanperf-"+id+"-a-pod") {
			client = f
		}
	}
	if client == nil {
		t.Fatalf("up printed no client command for site a:\n%s", out)
	}
	for i := range client {
		if client[i] == "--duration" && i+1 < len(client) {
			client[i+1] = d
		}
	}
	b, err := exec.Command(client[0], client[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(client, " "), err, b)
	}
	var res agent.Result
	if err := json.Unmarshal(b, &res); err != nil || res.Error != "" || res.Metrics[results.TransactionsPerS] <= 0 {
		t.Fatalf("rr through the up testbed: %v %s\n%s", err, res.Error, b)
	}
	return res
}

// residueOf is what residue finds of run id: a testbed another test (or
// another user of the machine) left up is not this test's.
func residueOf(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, r := range residue(t) {
		if strings.Contains(r, "spanperf-"+id) || strings.Contains(r, id+".ledger") || strings.HasPrefix(r, "process ") {
			out = append(out, r)
		}
	}
	return out
}

// TestReadersLeaveRunDirAlone: summary and report read a run directory
// without changing it. With a torn last line (a run still writing, or
// killed mid-write), they skip the line, leave it in place, and work on a
// read-only directory as an unprivileged user; only run --resume cuts it.
func TestReadersLeaveRunDirAlone(t *testing.T) {
	requireRoot(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	p := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(p, []byte("name: readers\ndatapaths: [native]\nworkloads:\n  - type: rr\nrepetitions: 2\nduration: 200ms\nwarmup: 0s\n"), 0o644)
	top, err := os.MkdirTemp("", "clitest-readers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(top, "run"), 0o755); os.RemoveAll(top) })
	dir := filepath.Join(top, "run")
	if _, errOut, code := spanperf(t, "run", "-f", p, "--out", dir); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	recs := filepath.Join(dir, results.RecordsFile)
	f, err := os.OpenFile(recs, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run":"torn","trial":5,"datapath":"nat`)
	f.Close()
	torn, _ := os.ReadFile(recs)

	// As root, on a writable directory: the torn line stays.
	for _, args := range [][]string{{"summary", dir}, {"report", dir}, {"report", "--format", "json", dir}} {
		if out, errOut, code := spanperf(t, args...); code != 0 || !strings.Contains(out, "native") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if b, _ := os.ReadFile(recs); !bytes.Equal(b, torn) {
			t.Fatalf("%v changed %s: %d bytes, was %d", args, recs, len(b), len(torn))
		}
	}

	// As nobody, on a read-only directory.
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(top, 0o755)
	os.Chmod(recs, 0o444)
	os.Chmod(filepath.Join(dir, results.ManifestFile), 0o444)
	os.Chmod(dir, 0o555)
	for _, args := range [][]string{{"summary", dir}, {"report", dir}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil || !strings.Contains(o.String(), "native") {
			t.Errorf("%v as nobody on a read-only run dir: %v\n%s%s", args, err, o.String(), e.String())
		}
	}
	if b, _ := os.ReadFile(recs); !bytes.Equal(b, torn) {
		t.Fatalf("a reader changed %s", recs)
	}

	// Resume repairs it: the torn line goes, the records stay.
	os.Chmod(dir, 0o755)
	os.Chmod(recs, 0o644)
	os.Chmod(filepath.Join(dir, results.ManifestFile), 0o644)
	if _, errOut, code := spanperf(t, "run", "--resume", dir); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	b, _ := os.ReadFile(recs)
	if bytes.Contains(b, []byte(`"torn"`)) || len(b) == 0 || b[len(b)-1] != '\n' {
		t.Errorf("resume left the torn line:\n%s", b)
	}
	if rs, err := results.Load(dir); err != nil || len(rs) != 2 {
		t.Errorf("after resume: %d records (%v), want 2", len(rs), err)
	}
}

// TestKillThenCleanRemovesWorkloadTempDirs kills a run (SIGKILL) while its
// http trial serves from nginx, whose directory holds a TLS key and
// certificate: the directory is named after the run's testbed, so clean,
// scoped to it, removes it with the rest.
func TestKillThenCleanRemovesWorkloadTempDirs(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx not installed (Debian package nginx)")
	}
	cmd, e := startScenario(t, "name: killnginx\ndatapaths: [native]\nworkloads:\n  - type: http\n    server: nginx\n    tls: true\nrepetitions: 2\nduration: 5s\nwarmup: 0s\n")
	// The testbed's ID names its ledger, namespaces and temp dirs; its
	// ledger names the run's process as the owner.
	var run string
	var tmps []string
	for deadline := time.Now().Add(30 * time.Second); len(tmps) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no nginx temp dir named after testbed %q after 30 s:\n%s", run, e.String())
		}
		_, run = ledgersOf(cmd.Process.Pid)
		if run != "" {
			tmps, _ = filepath.Glob(filepath.Join(os.TempDir(), "spanperf-"+run+"-nginx-*"))
		}
	}
	time.Sleep(200 * time.Millisecond) // nginx serving, the key written
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, d := range tmps {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s gone before clean (%v): the kill came too late to test anything", d, err)
		}
	}
	out, errOut, code := spanperf(t, "clean", "--run", run)
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	for _, d := range tmps {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after clean:\n%s", d, out)
		}
	}
	if r := residueOf(t, run); len(r) > 0 {
		t.Errorf("left behind after SIGKILL and clean: %v\nclean said:\n%s", r, out)
	}
}
