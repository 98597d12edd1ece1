package kubedp

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// specsOf makes the site specs east (first cluster) and west (last).
func specsOf(cs []*kube.Clients) ([]kube.SiteSpec, []*kube.Clients) {
	last := cs[len(cs)-1]
	return []kube.SiteSpec{{Name: "east", Context: cs[0].Context}, {Name: "west", Context: last.Context}}, []*kube.Clients{cs[0], last}
}

// TestPreflightNamesMissing runs every solution's preflight against the
// real API servers, where none is installed: each names the missing API
// group-version and the context (and site) where it is missing.
func TestPreflightNamesMissing(t *testing.T) {
	cs := clustersOf(t)
	specs, clients := specsOf(cs)
	first := "context " + cs[0].Context + " (site east)"
	for _, tc := range []struct {
		name string
		opts map[string]any
		want []string
	}{
		{SkupperName, nil, []string{"skupper: " + first + " lacks API skupper.io/v2alpha1 (sites, accessgrants, accesstokens, connectors, listeners)", "Skupper v2"}},
		{SubmarinerName, nil, []string{"submariner: " + first + " lacks API submariner.io/v1 (gateways)", "Submariner"}},
		{IstioName, nil, []string{"istio: " + first + " lacks API networking.istio.io/v1|v1beta1 (gateways)", "Istio"}},
		{IstioName, map[string]any{"mode": "ambient"}, []string{"istio: " + first + " lacks API networking.istio.io/v1|v1beta1"}},
		{CiliumName, nil, []string{"cilium: " + first + " lacks API cilium.io/v2 (ciliumendpoints)", "Cilium"}},
		{LinkerdName, map[string]any{"link": "west"}, []string{"linkerd: " + first + " lacks API linkerd.io/v1alpha2 (serviceprofiles)", "Linkerd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := newAdapter(t, tc.name, tc.opts)
			err := dp.(kube.Preflighter).Preflight(testCtx(t, 30*time.Second), specs, clients)
			if err == nil {
				t.Fatal("preflight passed on clusters without the solution")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestPreflightBaselines: the baselines need nothing of the clusters,
// except that ClusterIP refuses sites in two clusters, naming them.
func TestPreflightBaselines(t *testing.T) {
	cs := clustersOf(t)
	specs, clients := specsOf(cs)
	ctx := testCtx(t, 30*time.Second)
	for _, name := range []string{PodName, HostNetName, NodePortName, LoadBalancerName} {
		if err := newAdapter(t, name, nil).(kube.Preflighter).Preflight(ctx, specs, clients); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	ci := newAdapter(t, ClusterIPName, nil).(kube.Preflighter)
	same := []kube.SiteSpec{{Name: "east", Context: cs[0].Context}, {Name: "west", Context: cs[0].Context}}
	if err := ci.Preflight(ctx, same, []*kube.Clients{cs[0], cs[0]}); err != nil {
		t.Errorf("clusterip in one cluster: %v", err)
	}
	if len(cs) > 1 {
		err := ci.Preflight(ctx, specs, clients)
		want := "k8s-clusterip: client site east (context " + cs[0].Context + ") and server site west (context " + cs[1].Context + ") are in different clusters"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
}

// TestSolutionSetupLeavesNothing: set up on clusters without the
// solution, Submariner's adapter creates its Service, fails on the
// ServiceExport (no such resource), says so naming the object and the
// context, and deletes the Service; Skupper's fails on its first Site;
// Istio's and Cilium's create their Services, find none of the
// solution's pods, say which selector found none where, and delete them.
func TestSolutionSetupLeavesNothing(t *testing.T) {
	cs := clustersOf(t)
	server := newRealSite(t, cs[len(cs)-1], "west", podOpts{})
	client := newRealSite(t, cs[0], "east", podOpts{})
	for _, tc := range []struct {
		name string
		opts map[string]any
		want string
	}{
		{SubmarinerName, nil, "submariner: create serviceexport " + server.ns + "/" + ServiceName + " in context " + server.clients.Context},
		{SkupperName, nil, "skupper: create site " + server.ns + "/spanperf-west in context " + server.clients.Context},
		{IstioName, map[string]any{"mode": "ambient"}, "istio: no running istio-eastwestgateway pods (istio=eastwestgateway) in namespace istio-system of context " + client.clients.Context + " (set option gateway_selector)"},
		{CiliumName, nil, "cilium: no running cilium-agent pods (k8s-app=cilium) in namespace kube-system of context " + client.clients.Context + " on the agent pods' nodes (set option agent_selector)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newAdapter(t, tc.name, tc.opts).(adapter).setup(testCtx(t, time.Minute), []Site{client, server})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
			for _, s := range []*realSite{client, server} {
				list, err := s.clients.Kube.CoreV1().Services(s.ns).List(testCtx(t, 20*time.Second), metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(list.Items) > 0 {
					t.Errorf("left %d services in %s/%s", len(list.Items), s.clients.Context, s.ns)
				}
			}
		})
	}
}

// TestSidecarMissing: with no injection, the mesh adapters refuse an
// agent pod without its proxy container, naming the pod.
func TestSidecarMissing(t *testing.T) {
	cs := clustersOf(t)
	server := newRealSite(t, cs[0], "west", podOpts{})
	_, err := sidecars(LinkerdName, "linkerd-proxy", "sidecar", "hint", []Site{server})
	want := "linkerd: agent pod " + server.ns + "/" + server.pod.Name + " of site west in context " + cs[0].Context + " has no linkerd-proxy container: hint"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestAliveNamesGonePod: Link.Alive of a solution passes while its
// component pods run, and fails naming the adapter, the component, the pod
// and the context once a pod is deleted (as an eviction mid-run would).
func TestAliveNamesGonePod(t *testing.T) {
	cs := clustersOf(t)
	site := newRealSite(t, cs[0], "west", podOpts{})
	comps, err := sidecars(IstioName, "agent", "sidecar", "", []Site{site})
	if err != nil {
		t.Fatal(err)
	}
	check := alive(IstioName, []Site{site}, comps)
	if err := check(); err != nil {
		t.Fatalf("alive with the pod running: %v", err)
	}
	zero := int64(0)
	if err := cs[0].Kube.CoreV1().Pods(site.ns).Delete(testCtx(t, 20*time.Second), site.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	want := "istio: agent@west: pod " + site.ns + "/" + site.pod.Name + " in context " + cs[0].Context
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err != nil {
			t.Log(err)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got %v\nwant it to contain %q", err, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("alive still passes 20s after the pod's deletion")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
