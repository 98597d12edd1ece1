package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// TestCompareGateOnRealRuns makes two real runs through the CLI, native
// stream over a wan shaped with tbf, 3 repetitions each: OLD at 200 Mbit/s,
// NEW at 100 Mbit/s, a known injected cost. compare of OLD and NEW must not
// pass (3+3 repetitions cannot reach p < 0.05, so the halved throughput is
// "likely worse", exit 2), and a run compared with itself must (exit 0).
func TestCompareGateOnRealRuns(t *testing.T) {
	requireRoot(t)
	run := func(name, rate string) (dir string, median float64) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name+".yaml")
		src := fmt.Sprintf("name: gate-%s\nwan: {rate: %s}\ndatapaths: [native]\nworkloads:\n  - type: stream\nrepetitions: 3\nduration: 1s\nwarmup: 300ms\n", name, rate)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(t.TempDir(), name)
		if _, errOut, code := spanperf(t, "run", "-f", p, "--out", dir, "--seed", "1"); code != 0 {
			t.Fatalf("run %s: exit %d\n%s", name, code, errOut)
		}
		recs, err := results.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		var tput []float64
		for _, r := range recs {
			if r.Error != "" {
				t.Fatalf("run %s: trial %d failed: %s", name, r.Trial, r.Error)
			}
			tput = append(tput, r.Metrics[results.ThroughputBPS])
		}
		return dir, stats.Summarize(tput).Median
	}
	old, oldBPS := run("old", "200mbit")
	new, newBPS := run("new", "100mbit")
	// The injected cost is there: both runs are shaped (at most 15% over
	// their rate), and NEW carries half of OLD, within 20%. (A loaded
	// machine can keep a 1 s stream somewhat under its shaped rate.)
	if r := newBPS / oldBPS; oldBPS > 230e6 || newBPS > 115e6 || r < 0.4 || r > 0.6 {
		t.Fatalf("throughput medians %.3g and %.3g bit/s (ratio %.2f), want about 200M and 100M", oldBPS, newBPS, r)
	}

	out, errOut, code := spanperf(t, "compare", old, new)
	if code != 2 {
		t.Errorf("compare of 200 and 100 Mbit/s runs: exit %d, want 2 (inconclusive)\n%s%s", code, out, errOut)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "native") && strings.Contains(l, " "+results.ThroughputBPS+" ") {
			row = l
		}
	}
	if !strings.Contains(row, "? likely worse, too few repetitions to test") {
		t.Errorf("throughput row %q is not likely worse:\n%s", row, out)
	}
	if _, _, code := spanperf(t, "compare", old, new, "--allow-inconclusive"); code != 0 {
		t.Errorf("compare --allow-inconclusive: exit %d, want 0", code)
	}
	for _, dir := range []string{old, new} {
		if out, errOut, code := spanperf(t, "compare", dir, dir); code != 0 {
			t.Errorf("compare of a run with itself: exit %d, want 0\n%s%s", code, out, errOut)
		}
	}
}
