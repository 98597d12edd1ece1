package runner_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/probe/probetest"
	"github.com/spanperf/spanperf/internal/results"
)

// medians returns, per datapath, the median of metric over the successful
// records, and fails the test on a failed trial or a missing metric.
func medians(t *testing.T, recs []results.Record, metric string) map[string]float64 {
	t.Helper()
	vals := map[string][]float64{}
	for _, r := range recs {
		if r.Error != "" {
			t.Fatalf("%s trial %d: %s", r.Datapath, r.Trial, r.Error)
		}
		v, ok := r.Metrics[metric]
		if !ok {
			t.Fatalf("%s trial %d: no %s (%s)", r.Datapath, r.Trial, metric, r.Missing[metric])
		}
		vals[r.Datapath] = append(vals[r.Datapath], v)
	}
	out := map[string]float64{}
	for d, v := range vals {
		slices.Sort(v)
		n := len(v)
		out[d] = (v[(n-1)/2] + v[n/2]) / 2
	}
	return out
}

// Known answer (a): a custom datapath whose relay (testdata/spinrelay.py)
// spends exactly 1 ms of its thread's CPU on every read (two reads per
// transaction: the request and the response) costs 2000 µs per transaction
// more than the same relay without the spin, and so, over native, 2000 µs
// plus what a plain relay costs (measured in the same run), ±15%. The
// paced 200 transactions/s keep the relay at 40% of one CPU, without
// queueing. A plain relay costs about a tenth of the injected figure.
func TestCustomRelayCostPerTransaction(t *testing.T) {
	datapathtest.RequireRoot(t)
	const spinUS, readsPerTx, rate = 1000, 2, 200
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 (scripts/deps.sh installs it) not found: %v", err)
	}
	script, err := filepath.Abs("testdata/spinrelay.py")
	if err != nil {
		t.Fatal(err)
	}
	// A name of its own, so the custom datapath finds the relay by comm.
	relay := filepath.Join(t.TempDir(), "spinrelay")
	if err := os.Symlink(strings.TrimSpace(string(out)), relay); err != nil {
		t.Fatal(err)
	}
	custom := func(label string, spin int) string {
		return fmt.Sprintf(`  - name: custom
    label: %s
    up: "exec %s %s $SPANPERF_SITE_ADDR:17100 $SPANPERF_PEER_ADDR:$SPANPERF_PORT %d"
    target: "{site_addr}:17100"
    components: spinrelay
    role: relay
    ready: "{site_addr}:17100"
`, label, relay, script, spin)
	}
	recs := runRecords(t, `name: cost
baseline: native
datapaths:
  - native
`+custom("plain", 0)+custom("spin", spinUS)+fmt.Sprintf(`workloads:
  - type: rr
    rate: %d
    request_size: 64
    response_size: 64
repetitions: 3
duration: 4s
warmup: 500ms
`, rate))
	for _, r := range recs {
		m := r.Metrics
		t.Logf("%-6s rep %d: %.1f tx/s, path %.3f cores (busy %.3f, foreign %.3f), relay %.3f cores, %.1f µs/transaction; warnings %q",
			r.Datapath, r.Rep, m[results.TransactionsPerS], m[results.CPUCoresPath], m[results.CPUCoresBusy],
			m[results.CPUCoresForeign], m[results.For(results.CPUCores, "spinrelay@a")], m[results.CPUMicrosPerTransaction], r.Warnings)
	}
	med := medians(t, recs, results.CPUMicrosPerTransaction)
	tps := medians(t, recs, results.TransactionsPerS)
	injected := float64(spinUS * readsPerTx)
	plain := med["plain"] - med["native"]
	want, got := injected+plain, med["spin"]-med["native"]
	t.Logf("cpu_us_per_transaction medians: native %.1f, plain relay %.1f, spinning relay %.1f; overhead over native %.1f µs, want %.0f injected (%d reads × %d µs) + %.1f of a plain relay = %.1f; tx/s native %.1f, plain %.1f, spin %.1f",
		med["native"], med["plain"], med["spin"], got, injected, readsPerTx, spinUS, plain, want, tps["native"], tps["plain"], tps["spin"])
	for d, v := range tps {
		if v < 0.95*rate {
			t.Errorf("%s carried %.1f tx/s, want the offered %d", d, v, rate)
		}
	}
	if plain > 0.25*injected {
		t.Errorf("a plain relay costs %.1f µs per transaction: too much beside the %.0f injected for a ±15%% bound to mean much", plain, injected)
	}
	if got < 0.85*want || got > 1.15*want {
		t.Errorf("overhead %.1f µs per transaction, want %.1f ±15%%", got, want)
	}
}

// Known answer (c) through the runner: a hog spinning 40% of a CPU beside
// a trial, not started by the run (adopted by init, in the root network
// namespace), is the trial's foreign CPU and gives it the warning; the
// same trial without the hog has none (on a quiet machine).
func TestForeignHogWarns(t *testing.T) {
	datapathtest.RequireRoot(t)
	const duty = 0.4
	src := `name: foreign
datapaths: [native]
workloads:
  - type: rr
    rate: 500
repetitions: 1
duration: 3s
warmup: 300ms
`
	run := func() results.Record {
		recs := runRecords(t, src)
		if len(recs) != 1 || recs[0].Error != "" {
			t.Fatalf("records %+v", recs)
		}
		return recs[0]
	}
	quiet := run()
	t.Logf("without the hog: foreign %.3f cores, path %.3f, busy %.3f; warnings %q", quiet.Metrics[results.CPUCoresForeign],
		quiet.Metrics[results.CPUCoresPath], quiet.Metrics[results.CPUCoresBusy], quiet.Warnings)
	if len(quiet.Warnings) > 0 {
		t.Errorf("a trial without the hog warns %q: is the machine quiet?", quiet.Warnings)
	}

	hog := probetest.StartHog(t, duty)
	h0, t0 := hog.CPUSeconds(t), time.Now()
	r := run()
	hogCores := (hog.CPUSeconds(t) - h0) / time.Since(t0).Seconds()
	foreign, ok := r.Metrics[results.CPUCoresForeign]
	t.Logf("with the hog (%.3f cores by its /proc/PID/stat over the run): foreign %.3f cores, path %.3f, busy %.3f; warnings %q",
		hogCores, foreign, r.Metrics[results.CPUCoresPath], r.Metrics[results.CPUCoresBusy], r.Warnings)
	switch {
	case !ok:
		t.Fatalf("no %s: %s", results.CPUCoresForeign, r.Missing[results.CPUCoresForeign])
	case foreign < 0.8*hogCores:
		t.Errorf("foreign %.3f cores, want ≥ %.3f (the hog's %.3f −20%%)", foreign, 0.8*hogCores, hogCores)
	case len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], "foreign CPU: "):
		t.Errorf("warnings %q, want the foreign CPU one", r.Warnings)
	case !strings.Contains(r.Warnings[0], hogComm(t)+" 0."):
		t.Errorf("warning %q does not name the hog (%s)", r.Warnings[0], hogComm(t))
	}
}

// Known answer (b): kernel vxlan encapsulates in the sender's system call
// and decapsulates in softirq, work no process of the datapath does: on the
// whole-path basis it costs more CPU per gigabyte than native. The
// overhead's distribution-free interval (Hodges–Lehmann: the pairwise
// differences vxlan − native between the [3rd, 23rd] of 25, 96.8%
// confidence for 5 + 5 interleaved repetitions, from the Mann-Whitney
// critical value U = 2) lies above 0.
func TestVXLANCostsMorePerGigabyte(t *testing.T) {
	datapathtest.RequireRoot(t)
	datapathtest.New(t, "vxlan", nil) // skips where vxlan cannot run
	const reps = 5
	recs := runRecords(t, fmt.Sprintf(`name: vxlan-cost
baseline: native
datapaths: [native, vxlan]
workloads:
  - type: stream
repetitions: %d
duration: 2s
warmup: 300ms
`, reps))
	vals := map[string][]float64{}
	for _, r := range recs {
		m := r.Metrics
		t.Logf("%-6s rep %d: %.2f Gbit/s, path %.3f cores (busy %.3f, foreign %.3f), %.3f CPU-s/GB; warnings %q", r.Datapath, r.Rep,
			m[results.ThroughputBPS]/1e9, m[results.CPUCoresPath], m[results.CPUCoresBusy], m[results.CPUCoresForeign],
			m[results.CPUSecondsPerGigabyte], r.Warnings)
		v, ok := m[results.CPUSecondsPerGigabyte]
		if r.Error != "" || !ok {
			t.Fatalf("%s rep %d: error %q, %s missing: %s", r.Datapath, r.Rep, r.Error, results.CPUSecondsPerGigabyte, r.Missing[results.CPUSecondsPerGigabyte])
		}
		vals[r.Datapath] = append(vals[r.Datapath], v)
	}
	if len(vals["native"]) != reps || len(vals["vxlan"]) != reps {
		t.Fatalf("values %v, want %d of each", vals, reps)
	}
	var diffs []float64
	for _, x := range vals["vxlan"] {
		for _, y := range vals["native"] {
			diffs = append(diffs, x-y)
		}
	}
	slices.Sort(diffs)
	lo, mid, hi := diffs[2], diffs[len(diffs)/2], diffs[len(diffs)-3]
	t.Logf("vxlan − native: %.3f CPU-s/GB [%.3f, %.3f] (Hodges–Lehmann, 96.8%%)", mid, lo, hi)
	if lo <= 0 {
		t.Errorf("vxlan's overhead per gigabyte %.3f [%.3f, %.3f]: the interval does not lie above 0", mid, lo, hi)
	}
}

// hogComm is the command name of the hog: this test binary's.
func hogComm(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := filepath.Base(exe)
	return c[:min(15, len(c))]
}

// A process in one of the run's network namespaces is the run's own even
// when nothing of the run is its ancestor: a custom datapath that starts a
// detached daemon (setsid -f, adopted by init) spinning 30% of a CPU in
// each site, not one of its components, has that CPU in the path, not in
// the foreign CPU.
func TestDetachedDaemonInRunNetnsIsOwn(t *testing.T) {
	datapathtest.RequireRoot(t)
	const duty = 0.3
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon := filepath.Join(t.TempDir(), "nsdaemon")
	if err := os.Symlink(exe, daemon); err != nil {
		t.Fatal(err)
	}
	recs := runRecords(t, fmt.Sprintf(`name: netns-own
datapaths:
  - name: custom
    label: detached
    up: "setsid -f sh -c 'echo $$ > {tmp}/daemon.pid; exec env %s=%g %s'"
    down: "kill $(cat {tmp}/daemon.pid)"
    target: "{peer_addr}:{port}"
workloads:
  - type: rr
    rate: 200
repetitions: 1
duration: 3s
warmup: 500ms
`, probetest.HogEnv, duty, daemon))
	if len(recs) != 1 || recs[0].Error != "" {
		t.Fatalf("records %+v", recs)
	}
	m := recs[0].Metrics
	t.Logf("two detached daemons of %.1f cores each: path %.3f cores, foreign %.3f, busy %.3f; components %+v; warnings %q",
		duty, m[results.CPUCoresPath], m[results.CPUCoresForeign], m[results.CPUCoresBusy], recs[0].Components, recs[0].Warnings)
	if want := 0.8 * 2 * duty; m[results.CPUCoresPath] < want {
		t.Errorf("path %.3f cores, want ≥ %.2f: the daemons in the run's namespaces are the run's", m[results.CPUCoresPath], want)
	}
	for _, w := range recs[0].Warnings {
		if strings.Contains(w, "nsdaemon") {
			t.Errorf("the daemons were counted as foreign: %q", w)
		}
	}
	// down killed them (init may not have reaped them yet: zombies are
	// gone). A SIGTERM is delivered, not obeyed, by the time kill returns:
	// on a loaded machine a daemon may take a moment to exit.
	var alive []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		alive = alive[:0]
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err == nil && strings.Contains(string(b), "(nsdaemon) ") && !strings.Contains(string(b), "(nsdaemon) Z") {
				alive = append(alive, e.Name())
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pid := range alive {
		t.Errorf("nsdaemon %s still runs 2 s after the run", pid)
	}
}
