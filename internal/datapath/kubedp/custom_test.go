package kubedp

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// customOpts are k8s-custom's options with one relay component in site
// west's namespace "user".
func customOpts(target string) map[string]any {
	return map[string]any{
		"target":       target,
		"host_network": true,
		"components": []map[string]any{
			{"name": "relay", "site": "west", "namespace": "user", "selector": "app=relay", "container": "relay"},
		},
	}
}

// TestCustomFollowsRollout: the target's templates are filled from the
// server's pod; the component is the relay pod of site west, named as the
// scenario names it; when its pod is replaced (a rollout), Alive says so
// and Refresh finds the new pod, after which Alive is content.
func TestCustomFollowsRollout(t *testing.T) {
	relayA := fakePod("user", "relay-a", "w1", map[string]string{"app": "relay"}, "relay")
	east, west := twoFakeSites(nil, []*corev1.Pod{relayA})
	west.pod.Spec.HostNetwork, west.pod.Status.HostIP = true, "198.18.144.1"
	c := newAdapter(t, CustomName, customOpts("{server_node_ip}:18123")).(*Custom)
	ctx := testCtx(t, 30*time.Second)
	link, err := c.setup(ctx, []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantTarget(t, link.Target, "198.18.144.1:18123")
	got := componentsByName(link.Components)
	if r, ok := got["relay"]; !ok || len(got) != 1 || r.Pod != "relay-a" || r.Site != "west" || r.Context != "west" || r.Container != "relay" || r.Role != DefaultCustomRole {
		t.Fatalf("components %+v, want relay: pod relay-a of west, container relay, role relay", link.Components)
	}
	if err := link.Alive(); err != nil {
		t.Fatalf("alive: %v", err)
	}
	pods := west.clients.Kube.CoreV1().Pods("user")
	if err := pods.Delete(ctx, "relay-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	relayB := fakePod("user", "relay-b", "w1", map[string]string{"app": "relay"}, "relay")
	relayB.UID = types.UID("uid-relay-b")
	if _, err := pods.Create(ctx, relayB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := link.Alive(); err == nil || !strings.Contains(err.Error(), "relay-a") {
		t.Errorf("alive after the pod was replaced: %v, want an error naming relay-a", err)
	}
	if err := link.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := componentsByName(link.Components)["relay"]; got.Pod != "relay-b" || got.PodUID != "uid-relay-b" {
		t.Errorf("after refresh: %+v, want pod relay-b", got)
	}
	if err := link.Alive(); err != nil {
		t.Errorf("alive after refresh: %v", err)
	}
}

// TestCustomSeveralPods: a selector that finds several pods names them
// NAME-i; the other templates fill in.
func TestCustomSeveralPods(t *testing.T) {
	east, west := twoFakeSites(nil, []*corev1.Pod{
		fakePod("user", "relay-a", "w1", map[string]string{"app": "relay"}, "relay"),
		fakePod("user", "relay-b", "w1", map[string]string{"app": "relay"}, "relay"),
	})
	west.pod.Spec.HostNetwork, west.pod.Status.PodIP = true, "198.18.144.7"
	c := newAdapter(t, CustomName, customOpts("relay.{namespace}.example:{port}")).(*Custom)
	link, err := c.setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantTarget(t, link.Target, "relay."+fakeNS+".example:7100")
	got := componentsByName(link.Components)
	if _, ok := got["relay-0"]; !ok || len(got) != 2 {
		t.Errorf("components %+v, want relay-0 and relay-1", link.Components)
	}
}

// TestCustomPreflight: a component whose selector finds no running pod,
// or whose site is not in the run, is named with its context, namespace
// and selector; a missing target is refused.
func TestCustomPreflight(t *testing.T) {
	pending := fakePod("user", "relay-a", "w1", map[string]string{"app": "relay"}, "relay")
	pending.Status.Phase = corev1.PodPending
	_, west := twoFakeSites(nil, []*corev1.Pod{pending})
	sites := []kube.SiteSpec{{Name: "east", Context: "east"}, {Name: "west", Context: "west"}}
	cs := []*kube.Clients{fakeCluster("east"), west.clients}
	c := newAdapter(t, CustomName, customOpts("{server_node_ip}:18123")).(*Custom)
	err := c.Preflight(context.Background(), sites, cs)
	if err == nil || !strings.Contains(err.Error(), "no running pod matches selector app=relay in namespace user of context west") {
		t.Errorf("preflight: %v, want no running pod, naming selector, namespace and context", err)
	}
	c.Components[0].Site = "north"
	if err := c.Preflight(context.Background(), sites, cs); err == nil || !strings.Contains(err.Error(), `no site "north" (sites: east, west)`) {
		t.Errorf("preflight: %v, want the unknown site named", err)
	}
	if err := newAdapter(t, CustomName, nil).(*Custom).Preflight(context.Background(), sites, cs); err != errNoTarget {
		t.Errorf("preflight without target: %v, want %v", err, errNoTarget)
	}
}

// TestCustomPreflightReal: against the real API servers, a component
// whose selector selects no pod is named with its context, namespace and
// selector, and one that selects a running pod (a pause pod the test
// makes in the server's cluster) passes.
func TestCustomPreflightReal(t *testing.T) {
	cs := clustersOf(t)
	specs, clients := specsOf(cs)
	west := clients[1].Context
	pod := newRealSite(t, clients[1], "relay", podOpts{})
	c := newAdapter(t, CustomName, customOpts("{server_node_ip}:18123")).(*Custom)
	c.Components[0].Namespace, c.Components[0].Selector = pod.ns, "app=no-such-relay"
	err := c.Preflight(testCtx(t, 30*time.Second), specs, clients)
	want := "component relay: no running pod matches selector app=no-such-relay in namespace " + pod.ns + " of context " + west
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("preflight: %v, want %q", err, want)
	}
	t.Log(err)
	c.Components[0].Selector = selectorString(pod.Selector())
	if err := c.Preflight(testCtx(t, 30*time.Second), specs, clients); err != nil {
		t.Errorf("preflight with a running pod: %v", err)
	}
}
