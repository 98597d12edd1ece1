package plugins

import (
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestControlWorkloadsRefuseDatapathsWithout: discovery and failover are
// refused at parse time, by file, line and key, with every datapath that
// cannot expose a service after setup or route to one served in two
// sites; the others pass.
func TestControlWorkloadsRefuseDatapathsWithout(t *testing.T) {
	src := `name: s
sites: 3
datapaths:
  - native
  - ipsec
  - mtls-relay
  - name: custom
    up: "true"
workloads:
  - type: discovery
  - type: failover
`
	_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
	want := "s.yaml:10: workloads[0].type: discovery: datapaths[1]: ipsec cannot expose a service after setup: a new child SA per exposed service is not built yet (ipsec's children cover the sites' own addresses only)\n" +
		"s.yaml:10: workloads[0].type: discovery: datapaths[3]: custom cannot expose a service after setup: custom: no expose command (the datapath's expose key)\n" +
		"s.yaml:11: workloads[1].type: failover: datapaths[0]: native cannot route to a service served in two sites\n" +
		"s.yaml:11: workloads[1].type: failover: datapaths[1]: ipsec cannot route to a service served in two sites\n" +
		"s.yaml:11: workloads[1].type: failover: datapaths[3]: custom cannot route to a service served in two sites: custom: no failover command or failover_target (the datapath's failover and failover_target keys)"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	ok := "name: s\nsites: 3\ndatapaths: [mtls-relay, {name: custom, up: \"true\", expose: \"true\", failover: \"true\", failover_target: \"{site_addr}:1\"}]\nworkloads: [{type: discovery}, {type: failover}]\n"
	if _, err := scenario.Parse("s.yaml", []byte(ok), Catalog{}); err != nil {
		t.Errorf("datapaths that can: %v", err)
	}
}
