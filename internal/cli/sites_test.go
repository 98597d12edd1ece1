package cli_test

import (
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
