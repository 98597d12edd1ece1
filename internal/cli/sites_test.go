package cli_test

import (
	"fmt"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestClientServerSites: three sites, a 5 ms link between a and c only.
// rr from a to c reads 10 ms more than from b to c, through native and
// through vxlan: each trial ran between the sites its point names.
func TestClientServerSites(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: sites
sites: 3
datapaths: [native, vxlan]
wan:
  links: [{between: [a, c], delay: 5ms}]
workloads:
  - type: rr
    client_site: [a, b]
    server_site: c
repetitions: 2
duration: 1s
warmup: 200ms
`)
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	for _, dp := range []string{"native", "vxlan"} {
		var ofDP []results.Record
		for _, r := range recs {
			if r.Datapath == dp {
				ofDP = append(ofDP, r)
			}
		}
		fromA := medianOf(t, ofDP, "client_site", "a", results.LatencyP50)
		fromB := medianOf(t, ofDP, "client_site", "b", results.LatencyP50)
		t.Logf("%s: rr p50 a→c %.3f ms, b→c %.3f ms", dp, fromA*1e3, fromB*1e3)
		if d := fromA - fromB; d < 0.0095 || d > 0.0105 {
			t.Errorf("%s: a→c minus b→c = %.3f ms, want 10 ± 0.5 ms", dp, d*1e3)
		}
	}
}

// TestThreeSiteMesh: the datapaths that join any number of sites carry rr
// between every pair of three sites, from the pair's own client site.
func TestThreeSiteMesh(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: mesh3
sites: 3
datapaths: [native, vxlan, wireguard, ipsec, mtls-relay, mesh-gateway]
workloads:
  - type: rr
    client_site: [a, b]
    server_site: c
  - type: rr
    client_site: a
    server_site: b
repetitions: 1
duration: 500ms
warmup: 100ms
`)
	if len(recs) != 18 {
		t.Fatalf("%d records, want 18 (6 datapaths × 3 pairs)", len(recs))
	}
	for _, r := range recs {
		if r.Metrics[results.TransactionsPerS] <= 0 {
			t.Errorf("%s %v→%v: %v transactions/s", r.Datapath, r.Params["client_site"], r.Params["server_site"], r.Metrics[results.TransactionsPerS])
		}
	}
}

// TestFanInKnownAnswer: clients in a and b at once against c, over links
// the emulator limits to 20 and 60 Mbit/s: each client gets its link's
// rate (of which 1448/1514 is payload), the aggregate is their sum, and
// Jain's index of shares 1:3 is 16/20 = 0.8.
func TestFanInKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: fanin
sites: 3
datapaths: [native]
wan:
  emulator: userspace
  links:
    - {between: [a, c], rate: 20mbit}
    - {between: [b, c], rate: 60mbit}
workloads:
  - type: stream
    client_site: "a+b"
    server_site: c
repetitions: 2
duration: 3s
warmup: 2s
`)
	const payload = 1448.0 / 1514
	a := medianOf(t, recs, "client_site", "a+b", results.For(results.ThroughputBPS, "a"))
	b := medianOf(t, recs, "client_site", "a+b", results.For(results.ThroughputBPS, "b"))
	sum := medianOf(t, recs, "client_site", "a+b", results.ThroughputBPS)
	jain := medianOf(t, recs, "client_site", "a+b", results.JainFairness)
	t.Logf("a %.1f Mbit/s, b %.1f Mbit/s, sum %.1f, Jain %.3f", a/1e6, b/1e6, sum/1e6, jain)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"a", a, 20e6 * payload}, {"b", b, 60e6 * payload}, {"sum", sum, 80e6 * payload}} {
		if c.got < 0.95*c.want || c.got > 1.03*c.want {
			t.Errorf("%s: %.2f Mbit/s, want %.2f (−5%%, +3%%)", c.name, c.got/1e6, c.want/1e6)
		}
	}
	if jain < 0.77 || jain > 0.83 {
		t.Errorf("Jain's index %.3f, want 0.8 ± 0.03", jain)
	}
}

// TestSitesSweep: sites: [2, 4] gives each count a testbed of its own
// (rr runs from a to the last site of each), and the records of a
// datapath with processes carry their idle cost per site: mtls-relay's
// HAProxy per site is resident whatever the count, so its RSS per site
// stays within a factor of 1.5 from 2 to 4 sites.
func TestSitesSweep(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: scale
sites: [2, 4]
datapaths: [native, mtls-relay]
workloads:
  - type: rr
repetitions: 1
duration: 500ms
warmup: 100ms
`)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	rss := map[float64]float64{}
	for _, r := range recs {
		n := r.Params["sites"]
		setup := r.Metrics["datapath_setup_s"]
		t.Logf("%s sites=%v: setup %.1f ms, idle %.4f cores and %.1f MiB per site, rr %.0f/s", r.Datapath, n, setup*1e3,
			r.Metrics["idle_cpu_cores_per_site"], r.Metrics["idle_rss_bytes_per_site"]/(1<<20), r.Metrics[results.TransactionsPerS])
		if setup <= 0 || r.Metrics[results.TransactionsPerS] <= 0 {
			t.Errorf("%s sites=%v: setup %v, rr %v", r.Datapath, n, setup, r.Metrics[results.TransactionsPerS])
		}
		if r.Datapath == "mtls-relay" {
			rss[n.(float64)] = r.Metrics["idle_rss_bytes_per_site"]
		}
	}
	if rss[2] <= 0 || rss[4] <= 0 || rss[4] > 1.5*rss[2] || rss[2] > 1.5*rss[4] {
		t.Errorf("mtls-relay idle RSS per site: %v at 2 sites, %v at 4", rss[2], rss[4])
	}
}

// TestSitesSweepKnownCost: a custom datapath whose process in every site
// burns a known 0.2 cores, and which is ready 300 ms after its command
// starts, reads idle_cpu_cores_per_site 0.2 ± 0.03 and datapath_setup_s
// 0.30 to 0.40 s (readiness is polled every 50 ms) at 2 and 3 sites.
func TestSitesSweepKnownCost(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, fmt.Sprintf(`name: scale-known
sites: [2, 3]
datapaths:
  - name: custom
    label: burner
    up: "(sleep 0.3; exec socat TCP-LISTEN:17101,bind=$SPANPERF_SITE_ADDR,reuseaddr,fork SYSTEM:true) & exec %s agent burn --cores 0.2 --duration 2m"
    ready: "{site_addr}:17101"
    target: "{peer_addr}:{port}"
    components: spanperf
workloads:
  - type: rr
repetitions: 1
duration: 300ms
warmup: 100ms
`, bin))
	for _, r := range recs {
		idle, setup := r.Metrics["idle_cpu_cores_per_site"], r.Metrics["datapath_setup_s"]
		t.Logf("sites=%v: idle %.3f cores per site, setup %.0f ms", r.Params["sites"], idle, setup*1e3)
		if idle < 0.17 || idle > 0.23 {
			t.Errorf("sites=%v: idle %.3f cores per site, want 0.2 ± 0.03", r.Params["sites"], idle)
		}
		if setup < 0.3 || setup > 0.4 {
			t.Errorf("sites=%v: setup %.3f s, want 0.30 to 0.40", r.Params["sites"], setup)
		}
	}
}
