package kubedp

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// The tests in this file check the adapters' waits and component lists
// against fake API clients that play the solution's controller (set the
// status the adapter waits for): pure logic, beside the tests against the
// real clusters, which have none of the solutions installed.

const fakeNS = "spanperf-20261123-abcd"

// fakeSite is a site on a fake cluster (its own clients per context).
type fakeSite struct {
	name    string
	clients *kube.Clients
	pod     *corev1.Pod
}

func (s *fakeSite) Name() string { return s.name }
func (s *fakeSite) Spec() kube.SiteSpec {
	return kube.SiteSpec{Name: s.name, Context: s.clients.Context}
}
func (s *fakeSite) Clients() *kube.Clients      { return s.clients }
func (s *fakeSite) Namespace() string           { return fakeNS }
func (s *fakeSite) Pod() *corev1.Pod            { return s.pod }
func (s *fakeSite) Selector() map[string]string { return siteSelector(fakeNS, s.name) }

// fakeCluster is a fake API server of one context, holding pods.
func fakeCluster(context string, pods ...*corev1.Pod) *kube.Clients {
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	return &kube.Clients{Context: context, Kube: kubefake.NewClientset(objs...), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}
}

// fakePod is a running pod on node with labels and containers.
func fakePod(ns, name, node string, labels map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

// twoFakeSites are east (context east, node e1) and west (context west,
// node w1), their agent pods with containers, the clusters holding pods.
func twoFakeSites(eastPods, westPods []*corev1.Pod, containers ...string) (east, west *fakeSite) {
	ea := fakePod(fakeNS, "agent-east", "e1", siteSelector(fakeNS, "east"), append([]string{"agent"}, containers...)...)
	wa := fakePod(fakeNS, "agent-west", "w1", siteSelector(fakeNS, "west"), append([]string{"agent"}, containers...)...)
	east = &fakeSite{name: "east", clients: fakeCluster("east", append(eastPods, ea)...), pod: ea}
	west = &fakeSite{name: "west", clients: fakeCluster("west", append(westPods, wa)...), pod: wa}
	return east, west
}

// play waits (bounded) for the object gvr ns/name in c, then changes it
// as a controller would and writes it back.
func play(t *testing.T, c *kube.Clients, gvr schema.GroupVersionResource, name string, change func(u *unstructured.Unstructured)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			u, err := c.Dynamic.Resource(gvr).Namespace(fakeNS).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				change(u)
				if _, err := c.Dynamic.Resource(gvr).Namespace(fakeNS).Update(ctx, u, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(cancel)
}

func setStatus(status map[string]any) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { u.Object["status"] = status }
}

func condition(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

// wantAbsent fails unless gvr ns/name is gone from c.
func wantAbsent(t *testing.T, c *kube.Clients, gvr schema.GroupVersionResource, name string) {
	t.Helper()
	_, err := c.Dynamic.Resource(gvr).Namespace(fakeNS).Get(context.Background(), name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s %s in %s: %v, want deleted", gvr.Resource, name, c.Context, err)
	}
}

func wantTarget(t *testing.T, link func(from, to testbed.Site, port int) testbed.Target, want string) {
	t.Helper()
	if got := link(named("east"), named("west"), ServicePort).String(); got != want {
		t.Errorf("target %s, want %s", got, want)
	}
}

// componentsByName indexes components by name.
func componentsByName(cs []results.Component) map[string]results.Component {
	m := map[string]results.Component{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

// TestSubmarinerWaitsForReady: the adapter waits for the ServiceExport's
// Ready condition (Lighthouse's, beside mcs-api's Valid), targets the
// clusterset name, accounts the gateway and the route agents on the agent
// pods' nodes only, and Close deletes the export and the Service.
func TestSubmarinerWaitsForReady(t *testing.T) {
	sub := "submariner-operator"
	east, west := twoFakeSites(
		[]*corev1.Pod{
			fakePod(sub, "gw-east", "e9", map[string]string{"app": "submariner-gateway"}),
			fakePod(sub, "ra-e1", "e1", map[string]string{"app": "submariner-routeagent"}),
			fakePod(sub, "ra-e2", "e2", map[string]string{"app": "submariner-routeagent"}),
		},
		[]*corev1.Pod{
			fakePod(sub, "gw-west", "w9", map[string]string{"app": "submariner-gateway"}),
			fakePod(sub, "ra-w1", "w1", map[string]string{"app": "submariner-routeagent"}),
		})
	play(t, west.clients, serviceExportGVR, ServiceName, setStatus(map[string]any{"conditions": []any{
		condition("Valid", "True", "", ""), condition("Ready", "True", "", ""),
	}}))
	dp := newAdapter(t, SubmarinerName, nil).(*Submariner)
	link, err := dp.setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	wantTarget(t, link.Target, ServiceName+"."+fakeNS+".svc.clusterset.local:7100")
	got := componentsByName(link.Components)
	want := map[string]results.Component{
		"submariner-gateway@east":    {Name: "submariner-gateway@east", Role: "gateway", Site: "east", Context: "east", Namespace: sub, Pod: "gw-east", Node: "e9", PodUID: "uid-gw-east"},
		"submariner-routeagent@east": {Name: "submariner-routeagent@east", Role: "route-agent", Site: "east", Context: "east", Namespace: sub, Pod: "ra-e1", Node: "e1", PodUID: "uid-ra-e1"},
		"submariner-gateway@west":    {Name: "submariner-gateway@west", Role: "gateway", Site: "west", Context: "west", Namespace: sub, Pod: "gw-west", Node: "w9", PodUID: "uid-gw-west"},
		"submariner-routeagent@west": {Name: "submariner-routeagent@west", Role: "route-agent", Site: "west", Context: "west", Namespace: sub, Pod: "ra-w1", Node: "w1", PodUID: "uid-ra-w1"},
	}
	if len(got) != len(want) {
		t.Errorf("components %+v, want %+v", link.Components, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("component %s: %+v, want %+v", n, got[n], w)
		}
	}
	if err := link.Close(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wantAbsent(t, west.clients, serviceExportGVR, ServiceName)
	wantAbsent(t, west.clients, serviceGVR, ServiceName)
}

// TestSubmarinerInvalidExport: a ServiceExport that Lighthouse marks not
// Valid fails the setup at once with its reason, and nothing is left.
func TestSubmarinerInvalidExport(t *testing.T) {
	east, west := twoFakeSites(nil, nil)
	play(t, west.clients, serviceExportGVR, ServiceName, setStatus(map[string]any{"conditions": []any{
		condition("Valid", "False", "UnsupportedServiceType", "Service of type NodePort not supported"),
	}}))
	start := time.Now()
	_, err := newAdapter(t, SubmarinerName, nil).(*Submariner).setup(testCtx(t, 30*time.Second), []Site{east, west})
	want := "submariner: serviceexport " + fakeNS + "/" + ServiceName + " in context west is not valid: UnsupportedServiceType: Service of type NodePort not supported"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s: an invalid export must fail at once", d)
	}
	wantAbsent(t, west.clients, serviceExportGVR, ServiceName)
	wantAbsent(t, west.clients, serviceGVR, ServiceName)
}

// TestSubmarinerTimeout: an export that never becomes Ready fails after
// the timeout, with its last conditions.
func TestSubmarinerTimeout(t *testing.T) {
	east, west := twoFakeSites(nil, nil)
	play(t, west.clients, serviceExportGVR, ServiceName, setStatus(map[string]any{"conditions": []any{
		condition("Valid", "True", "", ""), condition("Ready", "False", "AwaitingExport", "waiting for the broker"),
	}}))
	_, err := newAdapter(t, SubmarinerName, map[string]any{"timeout": 2 * time.Second}).(*Submariner).setup(testCtx(t, 30*time.Second), []Site{east, west})
	want := "submariner: timeout waiting for serviceexport " + fakeNS + "/" + ServiceName + " in context west to be Ready after 2s (last: Ready=False (AwaitingExport: waiting for the broker), Valid=True ())"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestSkupperV2Links: the adapter makes a Site in each cluster, an
// AccessGrant in the server's, an AccessToken in the client's carrying
// exactly the grant's status (url, code, ca), the Connector and the
// Listener, waits until the Listener has a matching connector, and
// accounts the routers of the run's namespaces.
func TestSkupperV2Links(t *testing.T) {
	router := map[string]string{"skupper.io/component": "router"}
	east, west := twoFakeSites(
		[]*corev1.Pod{fakePod(fakeNS, "skupper-router-e", "e1", router, "router", "kube-adaptor")},
		[]*corev1.Pod{fakePod(fakeNS, "skupper-router-w", "w1", router, "router", "kube-adaptor")})
	grant := map[string]any{"url": "https://198.18.0.1:9090/x", "code": "c0de", "ca": "CA"}
	play(t, west.clients, skupperGVR("accessgrants"), "spanperf-grant", setStatus(grant))
	play(t, east.clients, skupperGVR("listeners"), ServiceName, setStatus(map[string]any{"status": "Ready", "hasMatchingConnector": true}))
	link, err := newAdapter(t, SkupperName, nil).(*Skupper).setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := east.clients.Dynamic.Resource(skupperGVR("accesstokens")).Namespace(fakeNS).Get(context.Background(), "spanperf-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range grant {
		if got, _, _ := unstructured.NestedString(tok.Object, "spec", k); got != v {
			t.Errorf("token spec.%s %q, want the grant's %q", k, got, v)
		}
	}
	for _, c := range []struct {
		cl   *kube.Clients
		res  string
		name string
	}{{west.clients, "sites", "spanperf-west"}, {east.clients, "sites", "spanperf-east"}, {west.clients, "connectors", ServiceName}} {
		if _, err := c.cl.Dynamic.Resource(skupperGVR(c.res)).Namespace(fakeNS).Get(context.Background(), c.name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s in %s: %v", c.res, c.name, c.cl.Context, err)
		}
	}
	wantTarget(t, link.Target, ServiceName+":7100")
	got := componentsByName(link.Components)
	if c := got["skupper-router@west"]; c.Pod != "skupper-router-w" || c.Container != "router" || c.Role != "router" || c.Namespace != fakeNS {
		t.Errorf("west router %+v", c)
	}
	if c := got["skupper-router@east"]; c.Pod != "skupper-router-e" || c.Context != "east" {
		t.Errorf("east router %+v", c)
	}
	if err := link.Close(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"sites", "accessgrants", "connectors"} {
		wantAbsent(t, west.clients, skupperGVR(r), map[string]string{"sites": "spanperf-west", "accessgrants": "spanperf-grant", "connectors": ServiceName}[r])
	}
	wantAbsent(t, east.clients, skupperGVR("listeners"), ServiceName)
	wantAbsent(t, east.clients, skupperGVR("accesstokens"), "spanperf-token")
}

// TestSkupperNoMatchingConnector: a Listener that never matches fails the
// setup after the timeout, quoting its status, and nothing is left.
func TestSkupperNoMatchingConnector(t *testing.T) {
	east, west := twoFakeSites(nil, nil)
	play(t, west.clients, skupperGVR("accessgrants"), "spanperf-grant", setStatus(map[string]any{"url": "u", "code": "c", "ca": "a"}))
	play(t, east.clients, skupperGVR("listeners"), ServiceName, setStatus(map[string]any{"status": "Pending", "message": "No matching connectors", "hasMatchingConnector": false}))
	_, err := newAdapter(t, SkupperName, map[string]any{"timeout": 2 * time.Second}).(*Skupper).setup(testCtx(t, 30*time.Second), []Site{east, west})
	want := "skupper: timeout waiting for listener " + fakeNS + "/" + ServiceName + " in context east to have a matching connector after 2s (last: status Pending: No matching connectors; no conditions yet)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	wantAbsent(t, east.clients, skupperGVR("listeners"), ServiceName)
	wantAbsent(t, west.clients, skupperGVR("sites"), "spanperf-west")
}

// TestSkupperV1Token: with api v1 the site controller's answer to the
// token request (data and annotations, relabelled connection-token) is
// given to the client's site as a connection-token Secret, and the server's
// Service carries the proxy and address annotations.
func TestSkupperV1Token(t *testing.T) {
	router := map[string]string{"skupper.io/component": "router"}
	east, west := twoFakeSites(
		[]*corev1.Pod{fakePod(fakeNS, "r-e", "e1", router, "router")},
		[]*corev1.Pod{fakePod(fakeNS, "r-w", "w1", router, "router")})
	play(t, west.clients, secretGVR, "spanperf-token", func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		l["skupper.io/type"] = "connection-token"
		u.SetLabels(l)
		u.SetAnnotations(map[string]string{"edge-host": "198.18.0.2", "skupper.io/generated-by": "west-id"})
		u.Object["data"] = map[string]any{"ca.crt": "Q0E="}
	})
	link, err := newAdapter(t, SkupperName, map[string]any{"api": "v1"}).(*Skupper).setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	tok, err := east.clients.Dynamic.Resource(secretGVR).Namespace(fakeNS).Get(context.Background(), "spanperf-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.GetLabels()["skupper.io/type"] != "connection-token" || tok.GetAnnotations()["edge-host"] != "198.18.0.2" {
		t.Errorf("client token labels %v annotations %v", tok.GetLabels(), tok.GetAnnotations())
	}
	if d, _, _ := unstructured.NestedString(tok.Object, "data", "ca.crt"); d != "Q0E=" {
		t.Errorf("client token data ca.crt %q", d)
	}
	svc, err := west.clients.Dynamic.Resource(serviceGVR).Namespace(fakeNS).Get(context.Background(), ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := svc.GetAnnotations(); a["skupper.io/proxy"] != "tcp" || a["skupper.io/address"] != ServiceName {
		t.Errorf("service annotations %v", a)
	}
	for _, s := range []*fakeSite{east, west} {
		if _, err := s.clients.Dynamic.Resource(configMapGVR).Namespace(fakeNS).Get(context.Background(), "skupper-site", metav1.GetOptions{}); err != nil {
			t.Errorf("skupper-site in %s: %v", s.clients.Context, err)
		}
	}
}

// TestLinkerdWaitsForMirror: the adapter exports the Service, waits for
// its mirror spanperf-server-<link> in the client's cluster, targets it,
// and accounts the proxies of both agent pods and the server cluster's
// gateway.
func TestLinkerdWaitsForMirror(t *testing.T) {
	gw := fakePod("linkerd-multicluster", "linkerd-gateway-x", "w2", map[string]string{"app": "linkerd-gateway"}, "linkerd-proxy", "pause")
	east, west := twoFakeSites(nil, []*corev1.Pod{gw}, "linkerd-proxy")
	go func() {
		time.Sleep(300 * time.Millisecond)
		mirror := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ServiceName + "-west", Namespace: fakeNS}}
		_, _ = east.clients.Kube.CoreV1().Services(fakeNS).Create(context.Background(), mirror, metav1.CreateOptions{})
	}()
	link, err := newAdapter(t, LinkerdName, map[string]any{"link": "west"}).(*Linkerd).setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantTarget(t, link.Target, ServiceName+"-west."+fakeNS+".svc.cluster.local:7100")
	if got := link.Target(named("west"), named("west"), ServicePort).String(); got != ServiceName+"."+fakeNS+".svc.cluster.local:7100" {
		t.Errorf("target from the server's own cluster %s, want the exported Service itself", got)
	}
	got := componentsByName(link.Components)
	for _, n := range []string{"linkerd-proxy@east", "linkerd-proxy@west", "linkerd-gateway@west"} {
		if _, ok := got[n]; !ok {
			t.Errorf("no component %s in %+v", n, link.Components)
		}
	}
	if c := got["linkerd-proxy@east"]; c.Pod != "agent-east" || c.Container != "linkerd-proxy" || c.Role != "sidecar" {
		t.Errorf("east proxy %+v", c)
	}
	if len(got) != 3 {
		t.Errorf("%d components, want 3: %+v", len(got), link.Components)
	}
	svc, err := west.clients.Dynamic.Resource(serviceGVR).Namespace(fakeNS).Get(context.Background(), ServiceName, metav1.GetOptions{})
	if err != nil || svc.GetLabels()["mirror.linkerd.io/exported"] != "true" {
		t.Errorf("exported service: %v %v", err, svc)
	}
}

// TestLinkerdNoMirror: without a mirror in time, the error names the
// mirror Service, the context and the Link.
func TestLinkerdNoMirror(t *testing.T) {
	east, west := twoFakeSites(nil, nil, "linkerd-proxy")
	_, err := newAdapter(t, LinkerdName, map[string]any{"link": "west", "timeout": time.Second, "gateway_selector": ""}).(*Linkerd).setup(testCtx(t, 30*time.Second), []Site{east, west})
	want := "linkerd: timeout waiting for mirror service " + fakeNS + "/" + ServiceName + "-west in context east (Link west) after 1s"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v\nwant %s…", err, want)
	}
	wantAbsent(t, west.clients, serviceGVR, ServiceName)
}

// TestIstioComponents: sidecar mode accounts each agent pod's istio-proxy
// and the east-west gateways; ambient mode the ztunnel of the agent pods'
// nodes only (not the others') and the gateways; both make the Service in
// every cluster.
func TestIstioComponents(t *testing.T) {
	ns := "istio-system"
	pods := func(p string) []*corev1.Pod {
		return []*corev1.Pod{
			fakePod(ns, "eastwest-"+p, p+"9", map[string]string{"istio": "eastwestgateway"}),
			fakePod(ns, "ztunnel-"+p+"1", p+"1", map[string]string{"app": "ztunnel"}),
			fakePod(ns, "ztunnel-"+p+"2", p+"2", map[string]string{"app": "ztunnel"}),
		}
	}
	for _, mode := range []string{IstioSidecar, IstioAmbient} {
		t.Run(mode, func(t *testing.T) {
			east, west := twoFakeSites(pods("e"), pods("w"), "istio-proxy")
			link, err := newAdapter(t, IstioName, map[string]any{"mode": mode}).(*Istio).setup(testCtx(t, 30*time.Second), []Site{east, west})
			if err != nil {
				t.Fatal(err)
			}
			defer closeLink(t, link)
			wantTarget(t, link.Target, ServiceName+"."+fakeNS+".svc.cluster.local:7100")
			got := componentsByName(link.Components)
			want := []string{"istio-eastwestgateway@east", "istio-eastwestgateway@west", "istio-proxy@east", "istio-proxy@west"}
			if mode == IstioAmbient {
				want = []string{"istio-eastwestgateway@east", "istio-eastwestgateway@west", "ztunnel@east", "ztunnel@west"}
				if got["ztunnel@east"].Pod != "ztunnel-e1" || got["ztunnel@west"].Node != "w1" {
					t.Errorf("ztunnels %+v %+v, want those on e1 and w1", got["ztunnel@east"], got["ztunnel@west"])
				}
			}
			for _, n := range want {
				if _, ok := got[n]; !ok {
					t.Errorf("no component %s in %+v", n, link.Components)
				}
			}
			if len(got) != len(want) {
				t.Errorf("components %+v, want %v", link.Components, want)
			}
			// Nothing was replaced: Refresh finds the same components.
			before := link.Components
			if err := link.Refresh(testCtx(t, 30*time.Second)); err != nil || !reflect.DeepEqual(before, link.Components) {
				t.Errorf("refresh: %v, components %+v, want %+v", err, link.Components, before)
			}
			for _, s := range []*fakeSite{east, west} {
				svc, err := s.clients.Dynamic.Resource(serviceGVR).Namespace(fakeNS).Get(context.Background(), ServiceName, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("service in %s: %v", s.clients.Context, err)
				}
				if g := svc.GetLabels()["istio.io/global"]; (g == "true") != (mode == IstioAmbient) {
					t.Errorf("service in %s: istio.io/global %q in mode %s", s.clients.Context, g, mode)
				}
			}
		})
	}
}

// TestCiliumGlobalService: a Service annotated global in both clusters,
// the client dials the local Service's name, the agents of the agent pods'
// nodes are the components.
func TestCiliumGlobalService(t *testing.T) {
	east, west := twoFakeSites(
		[]*corev1.Pod{fakePod("kube-system", "cilium-e1", "e1", map[string]string{"k8s-app": "cilium"}, "cilium-agent")},
		[]*corev1.Pod{fakePod("kube-system", "cilium-w1", "w1", map[string]string{"k8s-app": "cilium"}, "cilium-agent")})
	link, err := newAdapter(t, CiliumName, nil).(*Cilium).setup(testCtx(t, 30*time.Second), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantTarget(t, link.Target, ServiceName+":7100")
	got := componentsByName(link.Components)
	if c := got["cilium-agent@east"]; c.Pod != "cilium-e1" || c.Container != "cilium-agent" || c.Role != "agent" {
		t.Errorf("east agent %+v", c)
	}
	for _, s := range []*fakeSite{east, west} {
		svc, err := s.clients.Dynamic.Resource(serviceGVR).Namespace(fakeNS).Get(context.Background(), ServiceName, metav1.GetOptions{})
		if err != nil || svc.GetAnnotations()["service.cilium.io/global"] != "true" {
			t.Errorf("service in %s: %v %v", s.clients.Context, err, svc)
		}
	}
}

// TestWaitForKeepsLastReason: cond runs under the caller's context, not
// the wait's deadline, so the timeout error keeps the reason of the last
// poll rather than "context deadline exceeded".
func TestWaitForKeepsLastReason(t *testing.T) {
	calls := 0
	err := waitFor(context.Background(), "x", 300*time.Millisecond, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		calls++
		if _, has := ctx.Deadline(); has {
			return false, "cond got the wait's deadline", nil
		}
		return false, fmt.Sprintf("the real reason %d", calls), nil
	})
	want := fmt.Sprintf("timeout waiting for x after 300ms (last: the real reason %d)", calls)
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
