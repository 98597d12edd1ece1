package kubedp_test

import (
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/scenario"
)

// TestScenarioOptions: the registered adapters' options parse from a
// scenario file as the issue writes them; bad values are refused by the
// parser with file, line and key.
func TestScenarioOptions(t *testing.T) {
	const sites = "sites: [{name: east, context: east}, {name: west, context: west}]\n"
	const good = sites + `datapaths: [k8s-pod, k8s-hostnet, k8s-nodeport, skupper, submariner, {name: istio, mode: ambient}, {name: linkerd, link: west}, {name: k8s-loadbalancer, timeout: 30s}]
workloads: [{type: rr}]
`
	if _, err := scenario.Parse("east-west.yaml", []byte(good), plugins.Catalog{}); err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{sites + "datapaths: [{name: istio, mode: mesh}]\nworkloads: [{type: rr}]\n", "bad.yaml:2: datapaths[0].mode"},
		{sites + "datapaths: [linkerd]\nworkloads: [{type: rr}]\n", "link"},
	} {
		_, err := scenario.Parse("bad.yaml", []byte(tc.yaml), plugins.Catalog{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.yaml, err, tc.want)
		} else {
			t.Log(err)
		}
	}
}

// TestScenarioCustom: k8s-custom's components parse as a list of
// mappings, a limit may name one of them, and bad entries are refused
// with file, line and key.
func TestScenarioCustom(t *testing.T) {
	const head = "sites: [{name: east, context: east}, {name: west, context: west}]\nallow_patch: true\nworkloads: [{type: stream}]\n"
	good := head + `datapaths:
  - name: k8s-custom
    target: "{server_node_ip}:18123"
    host_network: true
    components:
      - {name: relay, site: west, namespace: user, selector: app=relay}
limits:
  relay: {cpu: [0.1, 0.3]}
`
	s, err := scenario.Parse("custom.yaml", []byte(good), plugins.Catalog{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got := s.Limits["relay"].Datapaths; len(got) != 1 || got[0] != "k8s-custom" {
		t.Errorf("limit relay applies to %v, want k8s-custom", got)
	}
	for _, tc := range []struct{ dp, want string }{
		{"  - {name: k8s-custom, target: \"{node}:1\"}\n", "bad.yaml:5: datapaths[0].target: \"{node}:1\": unknown {node}"},
		{"  - {name: k8s-custom}\n", `bad.yaml:5: datapaths[0]: missing required key "target"`},
		{"  - name: k8s-custom\n    target: a:1\n    components:\n      - {name: relay, site: west, namespace: user, selecter: app=relay}\n", `bad.yaml:8: datapaths[0].components[0].selecter: unknown key "selecter" (did you mean "selector"?)`},
		{"  - name: k8s-custom\n    target: a:1\n    components:\n      - {name: relay, site: west, namespace: user}\n", `bad.yaml:8: datapaths[0].components[0]: missing required key "selector"`},
		{"  - name: k8s-custom\n    target: a:1\n    components:\n      - {name: relay, site: west, namespace: user, selector: \"a in (\"}\n", `bad.yaml:8: datapaths[0].components[0].selector: "a in (" is not a label selector`},
		{"  - name: k8s-custom\n    target: a:1\n    components:\n      - {name: relay, site: west, namespace: User, selector: a=b}\n      - {name: relay, site: west, namespace: user, selector: a=b}\n", `bad.yaml:9: datapaths[0].components[1].name: duplicate name "relay"`},
		{"  - name: k8s-custom\n    target: a:1\n    components: {name: relay}\n", `bad.yaml:7: datapaths[0].components: want a list, got a mapping`},
		{"  - name: k8s-custom\n    target: a:1\n    components:\n      - {name: gw, site: west, namespace: user, selector: a=b}\nlimits:\n  router: {cpu: 0.5}\n", `limits.router: names no component or role of the datapaths (k8s-custom: gw (relay))`},
	} {
		_, err := scenario.Parse("bad.yaml", []byte(head+"datapaths:\n"+tc.dp), plugins.Catalog{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.dp, err, tc.want)
		}
	}
}
