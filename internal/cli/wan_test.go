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

// TestWANJitterAndLinksKnownAnswer: three sites, the client in a and the
// server in c. A per-pair link a–c with 5 ms ± 2 ms (uniform) and a link
// a–b with 30 ms that this path never crosses: rr's p50 reads 10 ms above
// native (the sum of two jitters is symmetric) and its p99 12.9 to 14.4 ms
// (two uniforms of ±2 ms sum to a triangle whose 99th percentile is 3.43 ms
// above its centre; the upper margin is scheduling noise, which only adds).
func TestWANJitterAndLinksKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, m := runWAN(t, `name: wan-links
sites: 3
datapaths: [native]
wan:
  links:
    - {between: [a, c], delay: 5ms, jitter: 2ms}
    - {between: [a, b], delay: 30ms}
workloads:
  - type: rr
repetitions: 2
duration: 3s
warmup: 300ms
`)
	if m.WANEmulator != "userspace" {
		t.Errorf("per-pair links ran on %q, want userspace", m.WANEmulator)
	}
	p50 := medianOf(t, recs, "", nil, results.LatencyP50)
	p99 := medianOf(t, recs, "", nil, results.LatencyP99)
	t.Logf("rr a→c: p50 %.3f ms, p99 %.3f ms", p50*1e3, p99*1e3)
	if p50 < 0.0095 || p50 > 0.0106 {
		t.Errorf("p50 %.3f ms, want 10 ms (+ native, tens of µs) ± 0.5 ms", p50*1e3)
	}
	if p99 < 0.0129 || p99 > 0.0144 {
		t.Errorf("p99 %.3f ms, want 12.9 to 14.4 ms: the jitter is not ±2 ms uniform each way", p99*1e3)
	}
}

// TestWANLinkSweepKnownAnswer: a sweep of one link's delay, a–c [1ms,
// 5ms] over three sites: rr a→c's p50 grows by 2 × 4 ms = 8 ms ± 0.5 ms
// between the points, which records name wan.link.a-c.delay.
func TestWANLinkSweepKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: wan-link-sweep
sites: 3
datapaths: [native]
wan:
  links:
    - {between: [a, c], delay: [1ms, 5ms]}
workloads:
  - type: rr
repetitions: 3
duration: 2s
warmup: 300ms
`)
	param := results.WANLinkParam("a", "c", results.WANLinkDelay)
	p1 := medianOf(t, recs, param, "1ms", results.LatencyP50)
	p5 := medianOf(t, recs, param, "5ms", results.LatencyP50)
	t.Logf("rr a→c p50: %.3f ms with a–c 1 ms, %.3f ms with 5 ms", p1*1e3, p5*1e3)
	if d := p5 - p1 - 0.008; d < -0.0005 || d > 0.0005 {
		t.Errorf("a–c 1 ms → 5 ms added %.3f ms to rr's p50, want 8 ± 0.5 ms", (p5-p1)*1e3)
	}
}
