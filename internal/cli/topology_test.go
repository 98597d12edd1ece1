package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
)

// topoRun runs, through datapaths dps, rr (and a stream, which makes the
// relays' CPU visible) from client to server on three sites in topology,
// over links that emulator delays by 5 ms one way, and returns the
// records by datapath.
func topoRun(t *testing.T, topology, dps, client, server, links string) map[string][]results.Record {
	t.Helper()
	recs, m := runWAN(t, `name: topo-`+topology+`
sites: 3
topology: `+topology+`
datapaths: [`+dps+`]
wan:
  emulator: userspace
  links: [`+links+`]
workloads:
  - type: rr
    client_site: `+client+`
    server_site: `+server+`
  - type: stream
    client_site: `+client+`
    server_site: `+server+`
repetitions: 3
duration: 1s
warmup: 300ms
`)
	var sc struct{ Topology string }
	if err := json.Unmarshal(m.Scenario, &sc); err != nil || sc.Topology != topology {
		t.Errorf("manifest's scenario: topology %q (%v), want %q", sc.Topology, err, topology)
	}
	by := map[string][]results.Record{}
	for _, r := range recs {
		by[r.Datapath] = append(by[r.Datapath], r)
	}
	return by
}

// rrP50 is the median rr p50 of recs.
func rrP50(t *testing.T, recs []results.Record) float64 {
	t.Helper()
	var rr []results.Record
	for _, r := range recs {
		if r.Workload == "rr" {
			rr = append(rr, r)
		}
	}
	return medianOf(t, rr, "client_site", rr[0].Params["client_site"], results.LatencyP50)
}

// streamCPU is the median CPU, over the stream trials of recs, of the
// component named comp (as in "haproxy@a").
func streamCPU(t *testing.T, recs []results.Record, comp string) float64 {
	t.Helper()
	var st []results.Record
	for _, r := range recs {
		if r.Workload == "stream" {
			st = append(st, r)
		}
	}
	key := results.For(results.CPUCores, comp)
	if _, ok := st[0].Metrics[key]; !ok {
		var have []string
		for k := range st[0].Metrics {
			if strings.HasPrefix(k, results.CPUCores+"{") {
				have = append(have, k)
			}
		}
		t.Fatalf("no %s in the stream record (have %v)", key, have)
	}
	return medianOf(t, st, "client_site", st[0].Params["client_site"], key)
}

// pathTolerance bounds how far the round trip of a path with four
// emulator holds (two links crossed each way) may read from the delay
// asked: 0.5 ms early, the WAN known answer's tolerance, and 1 ms late.
// A hold is paid late, never early, and the path here has twice the WAN
// answer's two holds, each with a relay that slept through the gap to
// wake: on this 2-core machine at load average 5, a mesh path of 10 ms
// each way read 20.35 ms over its base through mtls-relay and wireguard
// (20.15 through native), about 0.17 ms per hold.
const pathTolerance = 0.0005

// TestHubKnownAnswer: sites a (the hub), b and c. With the emulator
// delaying a–b and a–c by 5 ms one way, rr from b to c in topology hub
// crosses a, so its p50 reads 20 ms more than with only b–c delayed (a
// link the hub's path does not use, so that the emulator is on the path
// in both runs), within -0.5/+1 ms (pathTolerance). In the mesh,
// with a–b and a–c delayed, b reaches c directly and reads its base (under
// 1 ms). The hub's relay (or wireguard-go) carries the spokes' traffic:
// its CPU during a b→c stream is accounted to site a, where in the mesh it
// idles.
func TestHubKnownAnswer(t *testing.T) {
	requireRoot(t)
	viaHub := "{between: [a, b], delay: 5ms}, {between: [a, c], delay: 5ms}"
	offPath := "{between: [b, c], delay: 5ms}"
	hub := topoRun(t, "hub", "mtls-relay, wireguard", "b", "c", viaHub)
	hub0 := topoRun(t, "hub", "mtls-relay, wireguard", "b", "c", offPath)
	mesh := topoRun(t, "mesh", "mtls-relay, wireguard", "b", "c", viaHub)
	for dp, hubComp := range map[string]string{"mtls-relay": "haproxy@a", "wireguard": "wireguard-go@a"} {
		h, h0, m := rrP50(t, hub[dp]), rrP50(t, hub0[dp]), rrP50(t, mesh[dp])
		t.Logf("%s: rr b→c p50 %.3f ms in the hub with a–b and a–c delayed, %.3f ms with b–c delayed; %.3f ms in the mesh (the hub's hop costs %.3f ms)",
			dp, h*1e3, h0*1e3, m*1e3, (h0-m)*1e3)
		if d := h - h0 - 0.020; d < -pathTolerance || d > 2*pathTolerance {
			t.Errorf("%s: hub path's delay %.3f ms, want 20 ms -0.5/+1 ms", dp, (h-h0)*1e3)
		}
		if m > 0.001 {
			t.Errorf("%s: mesh rr b→c p50 %.3f ms, want under 1 ms (b–c is not delayed)", dp, m*1e3)
		}
		ch, cm := streamCPU(t, hub[dp], hubComp), streamCPU(t, mesh[dp], hubComp)
		t.Logf("%s: %s CPU during the b→c stream: %.3f cores in the hub, %.3f in the mesh", dp, hubComp, ch, cm)
		if ch < 0.05 || ch < 5*cm {
			t.Errorf("%s: %s CPU %.3f cores in the hub (mesh %.3f): want at least 0.05 and 5× the mesh's", dp, hubComp, ch, cm)
		}
	}
}

// TestChainKnownAnswer: sites a–b–c in a chain. With the emulator delaying
// a–b and b–c by 5 ms one way, rr from a to c in topology chain crosses
// b's relay, so its p50 reads the sum of the two links' round trips,
// 20 ms, more than with only a–c delayed (off the chain's path), within
// -0.5/+1 ms (pathTolerance).
// In the mesh a reaches c directly (under 1 ms), and b's relay, which
// carries the chain's stream, idles.
func TestChainKnownAnswer(t *testing.T) {
	requireRoot(t)
	viaB := "{between: [a, b], delay: 5ms}, {between: [b, c], delay: 5ms}"
	offPath := "{between: [a, c], delay: 5ms}"
	chain := topoRun(t, "chain", "mtls-relay", "a", "c", viaB)["mtls-relay"]
	chain0 := topoRun(t, "chain", "mtls-relay", "a", "c", offPath)["mtls-relay"]
	mesh := topoRun(t, "mesh", "mtls-relay", "a", "c", viaB)["mtls-relay"]
	h, h0, m := rrP50(t, chain), rrP50(t, chain0), rrP50(t, mesh)
	t.Logf("mtls-relay: rr a→c p50 %.3f ms in the chain with a–b and b–c delayed, %.3f ms with a–c delayed; %.3f ms in the mesh (b's hop costs %.3f ms)",
		h*1e3, h0*1e3, m*1e3, (h0-m)*1e3)
	if d := h - h0 - 0.020; d < -pathTolerance || d > 2*pathTolerance {
		t.Errorf("chain path's delay %.3f ms, want 20 ms -0.5/+1 ms", (h-h0)*1e3)
	}
	if m > 0.001 {
		t.Errorf("mesh rr a→c p50 %.3f ms, want under 1 ms (a–c is not delayed)", m*1e3)
	}
	ch, cm := streamCPU(t, chain, "haproxy@b"), streamCPU(t, mesh, "haproxy@b")
	t.Logf("haproxy@b CPU during the a→c stream: %.3f cores in the chain, %.3f in the mesh", ch, cm)
	if ch < 0.05 || ch < 5*cm {
		t.Errorf("haproxy@b CPU %.3f cores in the chain (mesh %.3f): want at least 0.05 and 5× the mesh's", ch, cm)
	}
}

// TestSixteenSites: 16 sites (a to p), through native and wireguard and
// mtls-relay in the mesh, then wireguard and mtls-relay in the hub: rr
// between the first and the last site both ways and between middle
// sites. Every trial carries transactions, the records carry the
// datapaths' setup time and idle RSS per site, and nothing is left
// behind: namespaces, ledgers, agents (runWAN), and no process (haproxy,
// wireguard-go) naming the run.
func TestSixteenSites(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct{ topology, dps string }{
		{"mesh", "native, wireguard, mtls-relay"},
		{"hub", "wireguard, mtls-relay"},
	} {
		recs, m := runWAN(t, `name: sixteen-`+tc.topology+`
sites: [16]
topology: `+tc.topology+`
datapaths: [`+tc.dps+`]
workloads:
  - type: rr
    client_site: [a, g]
    server_site: p
  - type: rr
    client_site: p
    server_site: a
  - type: rr
    client_site: h
    server_site: i
repetitions: 1
duration: 500ms
warmup: 100ms
`)
		if want := 4 * (strings.Count(tc.dps, ",") + 1); len(recs) != want {
			t.Fatalf("%s: %d records, want %d", tc.topology, len(recs), want)
		}
		for _, r := range recs {
			t.Logf("%s %s %v→%v: rr p50 %.1f µs; setup %.3f s, idle RSS per site %.1f MiB", tc.topology, r.Datapath,
				r.Params["client_site"], r.Params["server_site"], r.Metrics[results.LatencyP50]*1e6,
				r.Metrics[runner.DatapathSetupSeconds], r.Metrics[runner.IdleRSSBytesPerSite]/(1<<20))
			if r.Metrics[results.TransactionsPerS] <= 0 {
				t.Errorf("%s %s %v→%v: %v transactions/s", tc.topology, r.Datapath, r.Params["client_site"], r.Params["server_site"], r.Metrics[results.TransactionsPerS])
			}
		}
		if ps := processesNaming(t, m.Run); len(ps) > 0 {
			t.Errorf("%s: processes left behind: %v", tc.topology, ps)
		}
	}
}

// processesNaming lists the processes whose command line names run (the
// datapaths' daemons name their run's config files or devices).
func processesNaming(t *testing.T, run string) []string {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), run) {
			out = append(out, p.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
