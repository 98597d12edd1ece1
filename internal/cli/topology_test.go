package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
)

// topoRun runs, through datapaths dps, rr (and with stream a stream,
// which makes the relays' CPU visible) from client to server on three
// sites in topology, over links the userspace emulator delays, and
// returns the records by datapath.
func topoRun(t *testing.T, topology, dps, client, server, links string, stream bool) map[string][]results.Record {
	t.Helper()
	streamWorkload := ""
	if stream {
		streamWorkload = `
  - type: stream
    client_site: ` + client + `
    server_site: ` + server
	}
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
    server_site: `+server+streamWorkload+`
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
	for _, r := range st {
		t.Logf("%s stream %v→%v rep %d: %.1f Mbit/s, %s %.3f cores", r.Datapath, r.Params["client_site"], r.Params["server_site"], r.Rep,
			r.Metrics[results.ThroughputBPS]/1e6, comp, r.Metrics[results.For(results.CPUCores, comp)])
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

// pathTolerance is the WAN known answer's tolerance on a delay read back
// through rr's p50. A path through a middle site reads its delay late by
// more: each emulator hold is paid late, never early, and each daemon on
// the path sleeps through the gap and must wake. Both grow with the
// machine's load (a direct path of 10 ms each way read 0.35 ms late
// through mtls-relay and wireguard at load average 5, 0.65 to 1.1 ms at
// load average 25, against 0.15 ms through native). So the test measures
// that lateness on the direct path, two holds and two daemons, in the
// same datapath at the same time, and allows the middle site's path,
// four holds and three daemons, twice it: 20 ms - 0.5 ms to 20 ms +
// 0.5 ms + 2 × the direct path's lateness.
const pathTolerance = 0.0005

// cpuTick is the resolution of a component's CPU over a 1 s trial: the
// kernel counts process CPU in 10 ms clock ticks. The stream's rate, and
// with it the middle site's CPU, varies several-fold with the machine's
// load, so the test asks for CPU above the resolution in the topology
// (the middle site carries the stream) and none in the mesh (it idles).
const cpuTick = 0.01

// pathKnownAnswer runs rr (and a stream) from client to server on three
// sites through the datapaths in comps (by label; "ambient" is
// mesh-gateway with double) four times: in topology with the
// links onPath delayed (the topology's path crosses the middle site,
// whose component comps names), in topology with only offPath delayed (a
// link that path does not use, so that the emulator is on the path in
// both runs), in the mesh with onPath delayed, and in the mesh with the
// direct link client–server delayed 10 ms one way. The first reads 20 ms
// more than the second (within pathTolerance, which the last two
// calibrate); the mesh, whose path is the undelayed direct link, reads
// under 1 ms; and the middle site's
// component carries the stream in topology, where in the mesh it idles
// (cpuTick).
func pathKnownAnswer(t *testing.T, topology, client, server, onPath, offPath string, comps map[string]string) {
	t.Helper()
	var dps []string
	for dp := range comps {
		if dp == "ambient" {
			dp = "{name: mesh-gateway, label: ambient, double: true}"
		}
		dps = append(dps, dp)
	}
	list := strings.Join(dps, ", ")
	on := topoRun(t, topology, list, client, server, onPath, true)
	off := topoRun(t, topology, list, client, server, offPath, false)
	mesh := topoRun(t, "mesh", list, client, server, onPath, true)
	direct := topoRun(t, "mesh", list, client, server, "{between: ["+client+", "+server+"], delay: 10ms}", false)
	for dp, comp := range comps {
		h, h0, m, md := rrP50(t, on[dp]), rrP50(t, off[dp]), rrP50(t, mesh[dp]), rrP50(t, direct[dp])
		late := max(md-m-0.020, 0)
		t.Logf("%s: rr %s→%s p50 %.3f ms in the %s with its path delayed, %.3f ms with %s delayed; %.3f ms in the mesh (the middle hop costs %.3f ms), %.3f ms with the direct link delayed (%.3f ms late)",
			dp, client, server, h*1e3, topology, h0*1e3, offPath, m*1e3, (h0-m)*1e3, md*1e3, late*1e3)
		if d := h - h0 - 0.020; d < -pathTolerance || d > pathTolerance+2*late {
			t.Errorf("%s: %s path's delay %.3f ms, want 20 ms -0.5/+%.3f ms (0.5 + 2 × the direct path's lateness)", dp, topology, (h-h0)*1e3, (pathTolerance+2*late)*1e3)
		}
		if m > 0.001 {
			t.Errorf("%s: mesh rr %s→%s p50 %.3f ms, want under 1 ms (%s–%s is not delayed)", dp, client, server, m*1e3, client, server)
		}
		ch, cm := streamCPU(t, on[dp], comp), streamCPU(t, mesh[dp], comp)
		t.Logf("%s: %s CPU during the %s→%s stream: %.3f cores in the %s, %.3f in the mesh", dp, comp, client, server, ch, topology, cm)
		if ch < 2*cpuTick || cm > cpuTick {
			t.Errorf("%s: %s CPU %.3f cores in the %s, %.3f in the mesh: want at least %.2f in the %[4]s (it carries the stream) and at most %.2f in the mesh (it idles)",
				dp, comp, ch, topology, cm, 2*cpuTick, cpuTick)
		}
	}
}

// TestHubKnownAnswer: sites a (the hub), b and c; rr from b to c. With
// a–b and a–c delayed by 5 ms one way, the hub's path crosses both links,
// 20 ms a round trip; b–c, delayed in the control run, is the mesh's
// path (pathKnownAnswer). The hub's relay (mtls-relay), wireguard-go
// (wireguard) and east-west gateway (mesh-gateway) carry the spokes'
// stream, accounted to site a.
func TestHubKnownAnswer(t *testing.T) {
	requireRoot(t)
	pathKnownAnswer(t, "hub", "b", "c",
		"{between: [a, b], delay: 5ms}, {between: [a, c], delay: 5ms}", "{between: [b, c], delay: 5ms}",
		map[string]string{"mtls-relay": "haproxy@a", "wireguard": "wireguard-go@a", "mesh-gateway": "haproxy-gateway@a"})
}

// TestChainKnownAnswer: sites a–b–c in a chain; rr from a to c. With a–b
// and b–c delayed by 5 ms one way, the chain's path crosses both, the sum
// of their round trips, 20 ms; a–c, delayed in the control run, is the
// mesh's path (pathKnownAnswer). b's relay and gateway carry the stream;
// with double (ambient), b's gateway ends one outer layer and starts the
// next.
func TestChainKnownAnswer(t *testing.T) {
	requireRoot(t)
	pathKnownAnswer(t, "chain", "a", "c",
		"{between: [a, b], delay: 5ms}, {between: [b, c], delay: 5ms}", "{between: [a, c], delay: 5ms}",
		map[string]string{"mtls-relay": "haproxy@b", "mesh-gateway": "haproxy-gateway@b", "ambient": "haproxy-gateway@b"})
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
		if ps := processesWith(m.Run); len(ps) > 0 {
			t.Errorf("%s: processes left behind: %v", tc.topology, ps)
		}
	}
}
