package kubedp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/testbed"
)

// named is a testbed.Site by name only, for Link.Target.
type named string

func (n named) Name() string { return string(n) }
func (n named) Exec(context.Context, testbed.Command) (testbed.Process, error) {
	return nil, errors.New("named site: no exec")
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func closeLink(t *testing.T, l *datapath.Link) {
	t.Helper()
	if err := l.Close(testCtx(t, 30*time.Second)); err != nil {
		t.Errorf("close: %v", err)
	}
}

func wantKernel(t *testing.T, l *datapath.Link) {
	t.Helper()
	if len(l.Components) != 1 || l.Components[0] != datapath.KernelComponent() {
		t.Errorf("components %+v, want the kernel", l.Components)
	}
}

// TestPodTarget: k8s-pod's target of a site is its real pod's IP, in the
// cluster's pod CIDR, on the port asked for.
func TestPodTarget(t *testing.T) {
	cs := clustersOf(t)
	east := newRealSite(t, cs[0], "east", podOpts{})
	west := newRealSite(t, cs[len(cs)-1], "west", podOpts{})
	link, err := Pod{}.setup(testCtx(t, time.Minute), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantKernel(t, link)
	for _, tc := range []struct {
		from, to *realSite
	}{{east, west}, {west, east}} {
		got := link.Target(named(tc.from.name), named(tc.to.name), ServicePort)
		want := testbed.Target{Host: tc.to.pod.Status.PodIP, Port: ServicePort}
		if got != want || want.Host == "" {
			t.Errorf("target %s → %s: %+v, want %+v", tc.from.name, tc.to.name, got, want)
		}
		if a, ok := got.AddrPort(); !ok || !netip.MustParsePrefix("198.18.0.0/15").Contains(a.Addr()) {
			t.Errorf("target %s is not a pod IP in 198.18.0.0/15", got)
		}
	}
	if got := link.Target(named("east"), named("west"), 5201); got.Port != 5201 {
		t.Errorf("port 5201 became %d", got.Port)
	}
}

// TestHostNetTarget: k8s-hostnet asks for host-network pods and targets the
// server's node IP, which a real host-network pod reports; a pod not on
// the host network is refused, naming it.
func TestHostNetTarget(t *testing.T) {
	cs := clustersOf(t)
	east := newRealSite(t, cs[0], "east", podOpts{hostNetwork: true})
	west := newRealSite(t, cs[len(cs)-1], "west", podOpts{hostNetwork: true})
	link, err := HostNet{}.setup(testCtx(t, time.Minute), []Site{east, west})
	if err != nil {
		t.Fatal(err)
	}
	defer closeLink(t, link)
	wantKernel(t, link)
	got := link.Target(named("east"), named("west"), ServicePort)
	if got.Host != west.pod.Status.HostIP || got.Host == "" || got.Port != ServicePort {
		t.Errorf("target %+v, want host IP %s", got, west.pod.Status.HostIP)
	}
	plain := newRealSite(t, cs[0], "plain", podOpts{})
	_, err = HostNet{}.setup(testCtx(t, time.Minute), []Site{east, plain})
	if err == nil || !strings.Contains(err.Error(), plain.pod.Name) || !strings.Contains(err.Error(), "not on the host network") {
		t.Errorf("pod network pod accepted or unnamed: %v", err)
	}
}

// serviceOf reads the run's Service in s's namespace.
func serviceOf(t *testing.T, s *realSite) (*corev1.Service, error) {
	t.Helper()
	return s.clients.Kube.CoreV1().Services(s.ns).Get(testCtx(t, 20*time.Second), ServiceName, metav1.GetOptions{})
}

// checkService fails unless svc is of type typ and forwards ServicePort to
// the server's agent pod by its selector.
func checkService(t *testing.T, svc *corev1.Service, typ corev1.ServiceType, server *realSite) {
	t.Helper()
	if svc.Spec.Type != typ {
		t.Errorf("service type %s, want %s", svc.Spec.Type, typ)
	}
	if sel := selectorString(svc.Spec.Selector); sel != selectorString(server.Selector()) {
		t.Errorf("selector %s, want %s", sel, selectorString(server.Selector()))
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != ServicePort || svc.Spec.Ports[0].TargetPort.IntValue() != ServicePort || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want TCP %d → %d", svc.Spec.Ports, ServicePort, ServicePort)
	}
	if svc.Labels["spanperf.io/run"] != runOf(server) {
		t.Errorf("labels %v lack the run %s", svc.Labels, runOf(server))
	}
}

// wantGone fails unless the run's Service in s's namespace is gone.
func wantGone(t *testing.T, s *realSite) {
	t.Helper()
	if _, err := serviceOf(t, s); !apierrors.IsNotFound(err) {
		t.Errorf("service %s/%s in %s after close: %v, want not found", s.ns, ServiceName, s.clients.Context, err)
	}
}

// TestClusterIP: a real ClusterIP Service selects the server's pod on
// ServicePort, the target is its allocated cluster IP, Close deletes it;
// a client in another cluster is refused naming both contexts.
func TestClusterIP(t *testing.T) {
	cs := clustersOf(t)
	server := newRealSite(t, cs[0], "west", podOpts{})
	client := sameNamespace(t, server, "east")
	svc := &Service{Type: corev1.ServiceTypeClusterIP}
	link, err := svc.setup(testCtx(t, time.Minute), []Site{client, server})
	if err != nil {
		t.Fatal(err)
	}
	wantKernel(t, link)
	got, err := serviceOf(t, server)
	if err != nil {
		t.Fatal(err)
	}
	checkService(t, got, corev1.ServiceTypeClusterIP, server)
	if tg := link.Target(named("east"), named("west"), ServicePort); tg.Host != got.Spec.ClusterIP || tg.Port != ServicePort || tg.Host == "" {
		t.Errorf("target %+v, want %s:%d", tg, got.Spec.ClusterIP, ServicePort)
	}
	if tg := link.Target(named("west"), named("east"), ServicePort); tg != (testbed.Target{}) {
		t.Errorf("target of the client site %+v, want none", tg)
	}
	closeLink(t, link)
	wantGone(t, server)

	if len(cs) > 1 {
		other := newRealSite(t, cs[1], "far", podOpts{})
		_, err := svc.setup(testCtx(t, time.Minute), []Site{other, server})
		if err == nil || !strings.Contains(err.Error(), cs[1].Context) || !strings.Contains(err.Error(), cs[0].Context) {
			t.Errorf("client in another cluster: %v, want an error naming both contexts", err)
		}
		wantGone(t, server)
	}
}

// TestNodePort: a real NodePort Service gets a nodePort in the default
// range; the target is the server node's IP and that port, and a TCP
// connection from here to it reaches the agent server in the pod
// (kube-proxy's NodePort rules in the cluster).
func TestNodePort(t *testing.T) {
	cs := clustersOf(t)
	server := newRealSite(t, cs[len(cs)-1], "west", podOpts{agent: true})
	client := newRealSite(t, cs[0], "east", podOpts{})
	svc := &Service{Type: corev1.ServiceTypeNodePort}
	link, err := svc.setup(testCtx(t, time.Minute), []Site{client, server})
	if err != nil {
		t.Fatal(err)
	}
	got, err := serviceOf(t, server)
	if err != nil {
		t.Fatal(err)
	}
	checkService(t, got, corev1.ServiceTypeNodePort, server)
	np := int(got.Spec.Ports[0].NodePort)
	if np < 30000 || np > 32767 {
		t.Errorf("nodePort %d outside 30000-32767", np)
	}
	tg := link.Target(named("east"), named("west"), ServicePort)
	if tg.Host != server.pod.Status.HostIP || tg.Port != np {
		t.Errorf("target %+v, want %s:%d", tg, server.pod.Status.HostIP, np)
	}
	if a, ok := tg.AddrPort(); !ok || !netip.MustParsePrefix("198.18.0.0/15").Contains(a.Addr()) {
		t.Fatalf("target %s is not a node IP in 198.18.0.0/15", tg)
	}
	var conn net.Conn
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err = net.DialTimeout("tcp", tg.String(), 2*time.Second)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("dial %s (nodePort to the agent server): %v", tg, err)
	} else {
		t.Logf("dialled %s: connected to the agent server through the nodePort", tg)
		conn.Close()
	}
	closeLink(t, link)
	wantGone(t, server)
}

// TestLoadBalancerTimesOut: the test clusters have no load-balancer
// controller; k8s-loadbalancer gives up after its timeout with an error
// naming the Service and the context, and deletes the Service.
func TestLoadBalancerTimesOut(t *testing.T) {
	cs := clustersOf(t)
	server := newRealSite(t, cs[0], "west", podOpts{})
	client := sameNamespace(t, server, "east")
	dp, err := LoadBalancerInfo().New(map[string]any{"timeout": 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = dp.(*Service).setup(testCtx(t, time.Minute), []Site{client, server})
	took := time.Since(start)
	want := "k8s-loadbalancer: timeout waiting for an ingress address of service " + server.ns + "/" + ServiceName + " in context " + cs[0].Context + " after 3s"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "load-balancer controller") {
		t.Errorf("got %v\nwant it to contain %q", err, want)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	if took > 15*time.Second {
		t.Errorf("took %s with a 3s timeout", took)
	}
	wantGone(t, server)
}
