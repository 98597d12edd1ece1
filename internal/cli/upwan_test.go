package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestUpAppliesWAN brings up, through the binary, three sites whose wan
// sweeps delay [5ms, 20ms] with a 1 ms link a–b: up applies the sweep's
// first value, says so, and an rr from a to c through the testbed it left
// reads 10 ms plus native's round trip (p50 within 10–10.5 ms); down then
// leaves nothing, the emulator included.
func TestUpAppliesWAN(t *testing.T) {
	requireRoot(t)
	f := filepath.Join(t.TempDir(), "upwan.yaml")
	os.WriteFile(f, []byte(`name: upwan
sites: 3
wan:
  delay: [5ms, 20ms]
  links:
    - between: [a, b]
      delay: 1ms
datapaths: [native]
workloads:
  - type: rr
`), 0o644)
	id, out := upScenario(t, f, "native")
	down := func() {
		if o, e, code := spanperf(t, "down", "--run", id); code != 0 {
			t.Errorf("down: exit %d\n%s%s", code, o, e)
		}
	}
	defer func() { down() }()
	for _, want := range []string{"delay 1ms between a–b", "delay 5ms between a–c, b–c", "the first value of each sweep"} {
		if !strings.Contains(out, want) {
			t.Errorf("up does not say %q:\n%s", want, out)
		}
	}
	res := upClient(t, id, out, "1s")
	if p50 := res.Metrics[results.LatencyP50]; p50 < 0.010 || p50 > 0.0105 {
		t.Errorf("rr a→c p50 %.3f ms through 5 ms each way, want 10–10.5 ms", p50*1e3)
	}
	down()
	down = func() {}
	if r := residueOf(t, id); len(r) > 0 {
		t.Errorf("left behind after down: %v", r)
	}
}
