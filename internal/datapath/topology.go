package datapath

import "github.com/spanperf/spanperf/internal/testbed"

// nextHop is the site (index) to which site from hands traffic for site to
// in topology: the second site of testbed.TopologyPath. It is to itself in
// the mesh, and -1 when from is to or the topology is unknown.
func nextHop(topology string, n, from, to int) int {
	p := testbed.TopologyPath(topology, n, from, to)
	if len(p) < 2 {
		return -1
	}
	return p[1]
}

// transits reports, for each of n sites, the destinations it forwards
// traffic to on behalf of other sites in topology: transits(...)[k][d] is
// true when some path to d crosses k in its middle. In the mesh it is
// empty for every site.
func transits(topology string, n int) []map[int]bool {
	out := make([]map[int]bool, n)
	for k := range out {
		out[k] = map[int]bool{}
	}
	for from := 0; from < n; from++ {
		for to := 0; to < n; to++ {
			p := testbed.TopologyPath(topology, n, from, to)
			for m := 1; m < len(p)-1; m++ {
				out[p[m]][to] = true
			}
		}
	}
	return out
}

// neighbours is, for site i of n, the sites it joins directly in
// topology, in site order.
func neighbours(topology string, n, i int) []int {
	var out []int
	seen := map[int]bool{}
	for to := 0; to < n; to++ {
		if h := nextHop(topology, n, i, to); h >= 0 && !seen[h] {
			seen[h] = true
		}
	}
	for j := 0; j < n; j++ {
		if seen[j] {
			out = append(out, j)
		}
	}
	return out
}

// WANBypasser is implemented by datapaths whose sites reach each other
// past the wan router (one L2 segment of their own), so the wan's shaping
// (rate, delay, jitter, loss) never touches their traffic. BypassesWAN
// says so, for the parse-time refusal.
type WANBypasser interface {
	BypassesWAN() string
}
