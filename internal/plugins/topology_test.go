package plugins

import (
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestHubAndChainRefusedByMeshOnlyDatapaths: in the hub and the chain,
// the datapaths that build only the mesh are refused at parse time by
// file, line and key, saying what they support; mtls-relay, wireguard
// and mesh-gateway pass. "direct", the mesh's old name, still parses and reads as mesh.
func TestHubAndChainRefusedByMeshOnlyDatapaths(t *testing.T) {
	for _, topo := range []string{"hub", "chain"} {
		src := "name: s\nsites: 3\ntopology: " + topo + "\ndatapaths:\n  - native\n  - vxlan\n  - wireguard\n  - ipsec\n  - mtls-relay\n  - mesh-gateway\nworkloads: [{type: rr}]\n"
		_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
		want := "s.yaml:5: datapaths[0]: topology " + topo + ": not supported by native (it supports mesh, gateway)\n" +
			"s.yaml:6: datapaths[1]: topology " + topo + ": not supported by vxlan (it supports mesh, gateway)\n" +
			"s.yaml:8: datapaths[3]: topology " + topo + ": not supported by ipsec (it supports mesh, gateway)"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error:\n%v\nwant:\n%s", topo, err, want)
		}
	}
	src := "name: s\nsites: 2\ntopology: hub\ndatapaths: [ovs-vxlan]\nworkloads: [{type: rr}]\n"
	_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
	if want := "s.yaml:4: datapaths[0]: topology hub: not supported by ovs-vxlan (it supports mesh, gateway)"; err == nil || err.Error() != want {
		t.Errorf("ovs: error:\n%v\nwant:\n%s", err, want)
	}
	s, err := scenario.Parse("s.yaml", []byte("name: s\ntopology: direct\ndatapaths: [native]\nworkloads: [{type: rr}]\n"), Catalog{})
	if err != nil || s.Topology != "mesh" {
		t.Errorf("topology direct: %v, topology %q, want mesh", err, s.Topology)
	}
}
