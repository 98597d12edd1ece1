package kubedp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
)

// infos are the adapters' registry entries.
func infos() []datapath.Info {
	return []datapath.Info{PodInfo(), HostNetInfo(), ClusterIPInfo(), NodePortInfo(), LoadBalancerInfo(),
		SkupperInfo(), SubmarinerInfo(), IstioInfo(), CiliumInfo(), LinkerdInfo(), CustomInfo()}
}

// withDefaults fills opts with the defaults of info's options, as the
// scenario parser does.
func withDefaults(info datapath.Info, opts map[string]any) map[string]any {
	out := map[string]any{}
	for _, f := range info.Options {
		if f.Default != nil {
			out[f.Name] = f.Default
		}
	}
	for k, v := range opts {
		out[k] = v
	}
	return out
}

// newAdapter makes adapter name with opts over its defaults.
func newAdapter(t *testing.T, name string, opts map[string]any) datapath.Datapath {
	t.Helper()
	for _, info := range infos() {
		if info.Name == name {
			dp, err := info.New(withDefaults(info, opts))
			if err != nil {
				t.Fatalf("new %s: %v", name, err)
			}
			return dp
		}
	}
	t.Fatalf("no adapter %s", name)
	return nil
}

// TestNewRejectsBadOptions: options an adapter cannot use are refused by
// New with an error naming the adapter, the option and the value.
func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts map[string]any
		want string
	}{
		{LoadBalancerName, map[string]any{"timeout": -time.Second}, `k8s-loadbalancer: timeout -1s is negative`},
		{SkupperName, map[string]any{"api": "v3"}, `skupper: api "v3" (want v2 or v1)`},
		{SkupperName, map[string]any{"timeout": time.Duration(0)}, `skupper: timeout 0s: want a positive duration`},
		{SkupperName, map[string]any{"router_selector": "app in (a"}, `skupper: router_selector "app in (a"`},
		{SubmarinerName, map[string]any{"namespace": "Sub Mariner"}, `submariner: namespace "Sub Mariner"`},
		{SubmarinerName, map[string]any{"gateway_selector": "app=(x"}, `submariner: gateway_selector "app=(x"`},
		{IstioName, map[string]any{"mode": "mesh"}, `istio: mode "mesh" (want sidecar or ambient)`},
		{IstioName, map[string]any{"mode": "ambient", "revision": "canary"}, `istio: revision "canary" is for mode sidecar, not ambient`},
		{IstioName, map[string]any{"revision": "1.24_x"}, `istio: revision "1.24_x"`},
		{CiliumName, map[string]any{"agent_selector": "k8s-app=cilium,("}, `cilium: agent_selector "k8s-app=cilium,("`},
		{LinkerdName, map[string]any{"link": "West"}, `linkerd: link "West"`},
		{LinkerdName, map[string]any{"link": "west", "timeout": -time.Second}, `linkerd: timeout -1s: want a positive duration`},
	} {
		var info datapath.Info
		for _, i := range infos() {
			if i.Name == tc.name {
				info = i
			}
		}
		_, err := info.New(withDefaults(info, tc.opts))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s %v: got %v, want %s…", tc.name, tc.opts, err, tc.want)
		}
	}
}

// TestLinkerdNeedsLink: the parser refuses a linkerd entry without link
// (Required); an adapter made without it anyway is refused by Preflight and
// Setup before anything is created.
func TestLinkerdNeedsLink(t *testing.T) {
	if f := LinkerdInfo().Options[0]; f.Name != "link" || !f.Required {
		t.Errorf("option %s required %v, want link required", f.Name, f.Required)
	}
	l := newAdapter(t, LinkerdName, nil).(*Linkerd)
	if err := l.Preflight(context.Background(), nil, nil); err != errNoLink {
		t.Errorf("preflight: %v, want %v", err, errNoLink)
	}
	if _, err := l.setup(context.Background(), nil); err != errNoLink {
		t.Errorf("setup: %v, want %v", err, errNoLink)
	}
}

// TestInfos: every adapter is a Kubernetes one, its defaults are accepted,
// its options documented, and it declares its components.
func TestInfos(t *testing.T) {
	for _, info := range infos() {
		if !info.Kube || info.Summary == "" || info.Components == nil {
			t.Errorf("%s: Kube %v, summary %q, components declared %v", info.Name, info.Kube, info.Summary, info.Components != nil)
		}
		opts := map[string]any{}
		if info.Name == LinkerdName {
			opts["link"] = "west"
		}
		if _, err := info.New(withDefaults(info, opts)); err != nil {
			t.Errorf("%s: defaults refused: %v", info.Name, err)
		}
		if _, err := info.New(withDefaults(info, nil)); err != nil {
			t.Errorf("%s: New of the defaults alone (spanperf doctor) refused: %v", info.Name, err)
		}
		for _, f := range info.Options {
			if f.Doc == "" {
				t.Errorf("%s: option %s has no doc", info.Name, f.Name)
			}
		}
		if len(info.Components(withDefaults(info, opts), 2)) == 0 {
			t.Errorf("%s declares no components", info.Name)
		}
	}
}
