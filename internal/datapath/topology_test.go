package datapath

import (
	"fmt"
	"testing"

	"github.com/spanperf/spanperf/internal/testbed"
)

// TestTopologyPaths: the sites each topology's traffic crosses, the next
// hops, who forwards for whom, and who peers with whom, on four sites.
func TestTopologyPaths(t *testing.T) {
	for _, tt := range []struct {
		topo, path string
		from, to   int
	}{
		{testbed.TopologyMesh, "[1 3]", 1, 3},
		{testbed.TopologyDirect, "[1 3]", 1, 3},
		{testbed.TopologyGateway, "[3 0]", 3, 0},
		{testbed.TopologyHub, "[1 0 3]", 1, 3},
		{testbed.TopologyHub, "[0 2]", 0, 2},
		{testbed.TopologyHub, "[2 0]", 2, 0},
		{testbed.TopologyChain, "[0 1 2 3]", 0, 3},
		{testbed.TopologyChain, "[3 2 1]", 3, 1},
		{testbed.TopologyChain, "[2 3]", 2, 3},
		{testbed.TopologyChain, "[2]", 2, 2},
		{"star", "[]", 0, 1},
		{testbed.TopologyChain, "[]", 0, 4},
	} {
		if got := fmt.Sprint(testbed.TopologyPath(tt.topo, 4, tt.from, tt.to)); got != tt.path {
			t.Errorf("%s %d→%d: path %s, want %s", tt.topo, tt.from, tt.to, got, tt.path)
		}
	}
	if h := nextHop(testbed.TopologyChain, 4, 0, 3); h != 1 {
		t.Errorf("chain next hop 0→3 = %d, want 1", h)
	}
	if h := nextHop(testbed.TopologyHub, 4, 2, 3); h != 0 {
		t.Errorf("hub next hop 2→3 = %d, want 0", h)
	}
	for _, tt := range []struct {
		topo, transits, neighbours string
	}{
		{testbed.TopologyMesh, "[map[] map[] map[] map[]]", "[[1 2 3] [0 2 3] [0 1 3] [0 1 2]]"},
		{testbed.TopologyHub, "[map[1:true 2:true 3:true] map[] map[] map[]]", "[[1 2 3] [0] [0] [0]]"},
		{testbed.TopologyChain, "[map[] map[0:true 2:true 3:true] map[0:true 1:true 3:true] map[]]", "[[1] [0 2] [1 3] [2]]"},
	} {
		if got := fmt.Sprint(transits(tt.topo, 4)); got != tt.transits {
			t.Errorf("%s: transits %s, want %s", tt.topo, got, tt.transits)
		}
		var ns [][]int
		for i := 0; i < 4; i++ {
			ns = append(ns, neighbours(tt.topo, 4, i))
		}
		if got := fmt.Sprint(ns); got != tt.neighbours {
			t.Errorf("%s: neighbours %s, want %s", tt.topo, got, tt.neighbours)
		}
	}
}
