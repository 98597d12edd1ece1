package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// runWAN runs scenario src and returns its records and manifest.
func runWAN(t *testing.T, src string) ([]results.Record, results.Manifest) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, errOut, code := spanperf(t, "run", "-f", p, "--out", dir); code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m results.Manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Fatalf("trial %d (%v) failed: %s", r.Trial, r.Params, r.Error)
		}
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
	return recs, m
}

// medianOf is the median of metric over the records whose param has value.
func medianOf(t *testing.T, recs []results.Record, param string, value any, metric string) float64 {
	t.Helper()
	var vs []float64
	for _, r := range recs {
		if r.Params[param] == value {
			vs = append(vs, r.Metrics[metric])
		}
	}
	if len(vs) == 0 {
		t.Fatalf("no records with %s = %v", param, value)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// TestWANDelayKnownAnswer: a sweep of one-way delay 0 and 10 ms (each
// way) through the userspace emulator: rr's p50 reads 20 ms plus the
// native p50, within ±0.5 ms; the manifest says which emulator ran.
func TestWANDelayKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, m := runWAN(t, `name: wan-delay
datapaths: [native]
wan: {delay: [0s, 10ms], emulator: userspace}
workloads:
  - type: rr
repetitions: 3
duration: 2s
warmup: 300ms
`)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	if m.WANEmulator != "userspace" {
		t.Errorf("manifest wan_emulator %q, want userspace", m.WANEmulator)
	}
	p0 := medianOf(t, recs, results.WANDelayParam, "0s", results.LatencyP50)
	p10 := medianOf(t, recs, results.WANDelayParam, "10ms", results.LatencyP50)
	t.Logf("rr p50: %.3f ms at 0s, %.3f ms at 10ms one way", p0*1e3, p10*1e3)
	if d := p10 - p0 - 0.020; d < -0.0005 || d > 0.0005 {
		t.Errorf("10 ms each way added %.3f ms to rr's p50, want 20 ± 0.5 ms", (p10-p0)*1e3)
	}
}

// TestWANLossKnownAnswer: 1% loss on every link: a stream retransmits,
// and its retransmit rate is 1% ± 0.3 points.
func TestWANLossKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: wan-loss
datapaths: [native]
wan: {loss: 1%, delay: 1ms, emulator: userspace}
workloads:
  - type: stream
repetitions: 2
duration: 3s
warmup: 500ms
`)
	rate := medianOf(t, recs, results.WANLossParam, 1.0, results.RetransmitRate)
	retr := medianOf(t, recs, results.WANLossParam, 1.0, results.Retransmits)
	t.Logf("retransmits %v, retransmit rate %.3f%%", retr, rate*100)
	if retr == 0 || rate < 0.007 || rate > 0.013 {
		t.Errorf("retransmit rate %.3f%% (%v retransmits), want 1%% ± 0.3 points", rate*100, retr)
	}
}

// TestWANRateDelayKnownAnswer: 50 ms one way on a 100 Mbit/s link; a
// stream whose buffers exceed the bandwidth-delay product (1.25 MB) reaches
// ≥ 0.9 of the rate, and the record says which buffers it had.
func TestWANRateDelayKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: wan-rate
datapaths: [native]
wan: {rate: 100mbit, delay: 50ms, emulator: userspace}
workloads:
  - type: stream
repetitions: 1
duration: 4s
warmup: 3s
`)
	r := recs[0]
	bps, snd, rmem := r.Metrics[results.ThroughputBPS], r.Metrics[results.SendBufferBytes], r.Metrics[results.TCPRmemMaxBytes]
	t.Logf("%.1f Mbit/s; send buffer %.0f B, receive buffers up to %.0f B", bps/1e6, snd, rmem)
	if bps < 0.9*100e6 || bps > 100e6 {
		t.Errorf("throughput %.1f Mbit/s, want 90 to 100", bps/1e6)
	}
	if snd < 1.25e6 || rmem < 1.25e6 {
		t.Errorf("buffers (send %.0f, receive max %.0f) below the 1.25 MB bandwidth-delay product: the record cannot explain the rate", snd, rmem)
	}
}
