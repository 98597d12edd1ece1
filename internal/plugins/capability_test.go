package plugins

import (
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/scenario"
)

// TestControlWorkloadsRefuseDatapathsWithout: discovery or failover with
// no datapath that can expose a service after setup, or route to one
// served in two sites, is refused at parse time by file, line and key,
// with each datapath's reason. In a scenario where some datapaths can,
// the others are left out of the plan (Incapable says why).
func TestControlWorkloadsRefuseDatapathsWithout(t *testing.T) {
	src := `name: s
sites: 3
datapaths:
  - {name: ipsec, mode: transport}
  - name: custom
    up: "true"
workloads:
  - type: discovery
  - type: failover
`
	_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
	want := "s.yaml:8: workloads[0].type: discovery: datapaths[0]: ipsec cannot expose a service after setup: in transport mode: it protects the sites' own addresses only (use mode: tunnel)\n" +
		"s.yaml:8: workloads[0].type: discovery: datapaths[1]: custom cannot expose a service after setup: custom: no expose command (the datapath's expose key)\n" +
		"s.yaml:9: workloads[1].type: failover: datapaths[0]: ipsec cannot route to a service served in two sites\n" +
		"s.yaml:9: workloads[1].type: failover: datapaths[1]: custom cannot route to a service served in two sites: custom: no failover command or failover_target (the datapath's failover and failover_target keys)"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
	mixed := "name: s\nsites: 3\ndatapaths: [native, ipsec, mtls-relay, {name: custom, up: \"true\", expose: \"true\", failover: \"true\", failover_target: \"{site_addr}:1\"}]\nworkloads: [{type: discovery}, {type: failover}, {type: rr}]\n"
	s, err := scenario.Parse("s.yaml", []byte(mixed), Catalog{})
	if err != nil {
		t.Fatalf("datapaths of which some can: %v", err)
	}
	for _, c := range []struct {
		label, workload, why string
	}{
		{"native", "discovery", ""},
		{"native", "failover", "native cannot route to a service served in two sites"},
		{"ipsec", "discovery", ""},
		{"ipsec", "failover", "ipsec cannot route to a service served in two sites"},
		{"ipsec", "rr", ""},
		{"mtls-relay", "failover", ""},
		{"custom", "failover", ""},
	} {
		err := s.Incapable(Catalog{}, c.label, c.workload)
		if c.why == "" && err != nil || c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)) {
			t.Errorf("Incapable(%s, %s) = %v, want %q", c.label, c.workload, err, c.why)
		}
	}
}

// TestFailoverServersRefused: failover's two server sites are checked at
// parse time, by file, line and key: two different sites of the
// scenario, neither the client's; by default the last two, which takes
// three sites.
func TestFailoverServersRefused(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"name: s\ndatapaths: [mtls-relay]\nworkloads:\n  - type: failover\n",
			"s.yaml:4: workloads[0].servers: the last two sites serve and the first is the client's: needs 3 sites, the scenario has 2"},
		{"name: s\nsites: 3\ndatapaths: [mtls-relay]\nworkloads:\n  - type: failover\n    servers: [b+x, b+b, b]\n",
			"s.yaml:6: workloads[0].servers[0]: \"x\" is not a site (sites: a, b, c)\n" +
				"s.yaml:6: workloads[0].servers[1]: \"b+b\": want two different sites, \"b+c\" (the preferred first)\n" +
				"s.yaml:6: workloads[0].servers[2]: \"b\": want two different sites, \"b+c\" (the preferred first)"},
		{"name: s\nsites: 3\ndatapaths: [mtls-relay]\nworkloads:\n  - type: failover\n    client_site: c\n",
			// server_site, which failover does not use, defaults to c too.
			"s.yaml:5: workloads[0]: point \"attempt_timeout=1s client_site=c fail=server fail_after=1s interval=1ms run_for=3s servers=\" puts a client and the server in site c: they must be two sites\n" +
				"s.yaml:5: workloads[0]: point \"attempt_timeout=1s client_site=c fail=server fail_after=1s interval=1ms run_for=3s servers=\" puts the client in c, a server's site: they must be three sites"},
	} {
		_, err := scenario.Parse("s.yaml", []byte(c.src), Catalog{})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s\nerror:\n%v\nwant:\n%s", c.src, err, c.want)
		}
	}
	if _, err := scenario.Parse("s.yaml", []byte("name: s\nsites: 3\ndatapaths: [mtls-relay]\nworkloads:\n  - type: failover\n    client_site: b\n    servers: c+a\n"), Catalog{}); err != nil {
		t.Errorf("client b, servers c+a: %v", err)
	}
}

// TestControlWorkloadsInHubAndChain: in the hub and the chain, mtls-relay
// is refused discovery and failover at parse time (its exposures would
// join two sites' relays directly, bypassing the middle site), while
// wireguard, whose exposures follow the topology's next hop, runs
// discovery there.
func TestControlWorkloadsInHubAndChain(t *testing.T) {
	for _, topo := range []string{"hub", "chain"} {
		src := "name: s\nsites: 3\ntopology: " + topo + "\ndatapaths: [mtls-relay]\nworkloads:\n  - type: discovery\n  - type: failover\n"
		_, err := scenario.Parse("s.yaml", []byte(src), Catalog{})
		want := "s.yaml:6: workloads[0].type: discovery: datapaths[0]: mtls-relay cannot expose a service after setup: in topology " + topo + ": its exposures join two sites' relays directly, bypassing the sites in the middle\n" +
			"s.yaml:7: workloads[1].type: failover: datapaths[0]: mtls-relay cannot route to a service served in two sites: in topology " + topo + ": its exposures join two sites' relays directly, bypassing the sites in the middle"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error:\n%v\nwant:\n%s", topo, err, want)
		}
		ok := "name: s\nsites: 3\ntopology: " + topo + "\ndatapaths: [wireguard]\nworkloads:\n  - type: discovery\n"
		if _, err := scenario.Parse("s.yaml", []byte(ok), Catalog{}); err != nil {
			t.Errorf("%s: wireguard discovery: %v", topo, err)
		}
	}
}
