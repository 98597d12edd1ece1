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
