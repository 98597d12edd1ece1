package plugins

import (
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestPointToPointRefusedBeyondTwoSites: a datapath that joins two sites is
// refused at parse time, by file, line and key, on a scenario with more;
// those that join any number pass.
func TestPointToPointRefusedBeyondTwoSites(t *testing.T) {
	src := "name: s\nsites: 3\ndatapaths: [native, vxlan, wireguard, ipsec, mtls-relay, mesh-gateway, ovs-vxlan, geneve]\nworkloads: [{type: rr}]\n"
	_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
	want := "s.yaml:3: datapaths[6]: ovs-vxlan joins at most 2 sites; the scenario has 3\ns.yaml:3: datapaths[7]: geneve joins at most 2 sites; the scenario has 3"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	if _, err := scenario.Parse("s.yaml", []byte(strings.Replace(src, "sites: 3", "sites: 2", 1)), Catalog{}); err != nil {
		t.Errorf("two sites: %v", err)
	}
}
