package kubedp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Labels on what Serve makes: LabelServe selects one server pod (its
// Service's selector); the pod's LabelComponent is ComponentServer.
const (
	LabelServe      = "spanperf.io/serve"
	ComponentServer = "server"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by of the
	// EndpointSlice Serve keeps in the client's cluster for failover.
	ManagedBy = "spanperf.io"
)

// DefaultServeTimeout bounds Serve's waits: a pod's IP (k8s-pod), both
// servers' endpoints (failover).
const DefaultServeTimeout = 90 * time.Second

var (
	podGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	sliceGVR = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// serveName names the server pod and its Service for port in site s.
func serveName(s Site, port int) string { return fmt.Sprintf("spanperf-serve-%d-%s", port, s.Name()) }

// importName names the client-side Service and EndpointSlice of failover.
func importName(port int) string { return fmt.Sprintf("spanperf-import-%d", port) }

// servePod is the server pod Serve creates in site s: the agent image's
// `agent serve` on port, answering with the site's name, placed as the
// site's agent pod is.
func servePod(s Site, port int) (*corev1.Pod, error) {
	agentPod := s.Pod()
	var agentC *corev1.Container
	for i := range agentPod.Spec.Containers {
		if agentPod.Spec.Containers[i].Name == kube.AgentContainer {
			agentC = &agentPod.Spec.Containers[i]
		}
	}
	if agentC == nil {
		return nil, fmt.Errorf("pod %s/%s of site %s in context %s has no %s container", agentPod.Namespace, agentPod.Name, s.Name(), contextOf(s), kube.AgentContainer)
	}
	name := serveName(s, port)
	grace := int64(1)
	no := false
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace(),
			Labels: runLabels(s, map[string]string{LabelServe: name, kube.LabelSite: s.Name(), kube.LabelComponent: ComponentServer}),
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			NodeSelector:                  agentPod.Spec.NodeSelector,
			Tolerations:                   agentPod.Spec.Tolerations,
			Containers: []corev1.Container{{
				Name: "server", Image: agentC.Image, ImagePullPolicy: agentC.ImagePullPolicy,
				Command: []string{kube.AgentPath, "agent", "serve", "--listen", ":" + strconv.Itoa(port), "--name", s.Name()},
				Ports:   []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
			}},
		},
	}, nil
}

// serveService is the Service that exports the server pod of port in
// site s: of type typ, or headless ("" : the pod baseline, whose clients
// dial the pod's IP).
func serveService(s Site, port int, typ corev1.ServiceType) *corev1.Service {
	name := serveName(s, port)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace(), Labels: runLabels(s, nil)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{LabelServe: name},
			Ports: []corev1.ServicePort{{
				Name: "agent", Protocol: corev1.ProtocolTCP,
				Port: int32(port), TargetPort: intstr.FromInt32(int32(port)),
			}},
		},
	}
	if typ == "" {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	} else {
		svc.Spec.Type = typ
	}
	return svc
}

// importService is failover's Service in the client's cluster: no
// selector; its EndpointSlice (importSlice) is kept by Serve.
func importService(s Site, port int) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: importName(port), Namespace: s.Namespace(), Labels: runLabels(s, nil)},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "agent", Protocol: corev1.ProtocolTCP, Port: int32(port)}},
		},
	}
}

// importSlice is the EndpointSlice of importService(s, port) holding one
// endpoint, to (none when to is the zero Target).
func importSlice(s Site, port int, to testbed.Target) *discoveryv1.EndpointSlice {
	name := importName(port)
	sl := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace(), Labels: runLabels(s, map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy,
		})},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if to.Host == "" {
		return sl
	}
	p, n, proto, ready := int32(to.Port), "agent", corev1.ProtocolTCP, true
	sl.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{to.Host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	sl.Ports = []discoveryv1.EndpointPort{{Name: &n, Port: &p, Protocol: &proto}}
	return sl
}

// checkpoints are the times a Serve's watches first saw each checkpoint.
type checkpoints struct {
	// expect are the checkpoints snapshot waits for.
	expect []string
	mu     sync.Mutex
	seen   map[string]time.Time
}

// mark records name at now unless it was seen before.
func (c *checkpoints) mark(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	if _, ok := c.seen[name]; !ok {
		c.seen[name] = time.Now()
	}
}

// snapshot copies what was seen so far, after waiting up to a second
// for each of c.expect (a watch's event may trail the first answer).
func (c *checkpoints) snapshot() map[string]time.Time {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		all := true
		for _, k := range c.expect {
			_, ok := c.seen[k]
			all = all && ok
		}
		c.mu.Unlock()
		if all {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// startWatch starts a watch now (so that nothing after this call is
// missed) and feeds its events to on in a goroutine, re-watching when the
// API server closes it, until ctx ends.
func startWatch(ctx context.Context, open func(context.Context) (watch.Interface, error), on func(watch.Event)) error {
	w, err := open(ctx)
	if err != nil {
		return err
	}
	go func() {
		for {
			for ev := range w.ResultChan() {
				on(ev)
			}
			w.Stop()
			for {
				if ctx.Err() != nil {
					return
				}
				if w, err = open(ctx); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	return nil
}

// watchPod watches pod name in s's namespace.
func watchPod(ctx context.Context, s Site, name string, on func(*corev1.Pod)) error {
	pods := s.Clients().Kube.CoreV1().Pods(s.Namespace())
	return startWatch(ctx, func(ctx context.Context) (watch.Interface, error) {
		return pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	}, func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			on(p)
		}
	})
}

// watchReady watches the EndpointSlices of Service svc in s's namespace
// and calls on with whether any has a ready endpoint, on every change.
func watchReady(ctx context.Context, s Site, svc string, on func(ready bool)) error {
	slices := s.Clients().Kube.DiscoveryV1().EndpointSlices(s.Namespace())
	var mu sync.Mutex
	ready := map[string]bool{}
	return startWatch(ctx, func(ctx context.Context) (watch.Interface, error) {
		return slices.Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	}, func(ev watch.Event) {
		sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		r := false
		for _, e := range sl.Endpoints {
			if len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				r = true
			}
		}
		if ev.Type == watch.Deleted {
			r = false
		}
		ready[sl.Name] = r
		any := false
		for _, v := range ready {
			any = any || v
		}
		on(any)
	})
}

// served is what one Serve call made.
type served struct {
	adapter string
	// typ is the export Service's type; "" is headless (k8s-pod).
	typ   corev1.ServiceType
	delay time.Duration
	made  created
	stop  context.CancelFunc
	cp    checkpoints
}

// undo stops the watches and the controller and deletes what was made.
func (sv *served) undo(ctx context.Context) error {
	sv.stop()
	return sv.made.close(ctx, sv.adapter)
}

// fail deletes the server pod of port in site (its grace period, 1 s,
// lets the kubelet stop it with SIGTERM as `kubectl delete pod` would).
func (sv *served) fail(ctx context.Context, site testbed.Site, sites []Site, port int) error {
	for _, s := range sites {
		if s.Name() != site.Name() {
			continue
		}
		name := serveName(s, port)
		if err := s.Clients().Kube.CoreV1().Pods(s.Namespace()).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("%s: delete pod %s/%s in context %s: %w", sv.adapter, s.Namespace(), name, contextOf(s), err)
		}
		return nil
	}
	return fmt.Errorf("%s: %s is not a server site", sv.adapter, site.Name())
}

// serveOn is ServeFunc of a baseline adapter named adapter, whose export
// Service is of type typ ("" : headless, clients dial pod IPs) and whose
// failover switch waits delay more (a known answer).
func serveOn(adapter string, typ corev1.ServiceType, delay time.Duration, sites []Site) datapath.ServeFunc {
	byName := map[string]Site{}
	for _, s := range sites {
		byName[s.Name()] = s
	}
	return func(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (_ *datapath.Served, err error) {
		client := byName[from.Name()]
		var servers []Site
		for _, t := range to {
			s := byName[t.Name()]
			if s == nil {
				return nil, fmt.Errorf("%s: %s is not a Kubernetes site of the run", adapter, t.Name())
			}
			servers = append(servers, s)
		}
		if client == nil || len(servers) < 1 || len(servers) > 2 {
			return nil, fmt.Errorf("%s: serve from %s to %d sites: want a site of the run and one or two servers", adapter, from.Name(), len(to))
		}
		wctx, stop := context.WithCancel(context.Background())
		sv := &served{adapter: adapter, typ: typ, delay: delay, stop: stop}
		defer func() {
			if err != nil {
				sv.stop()
				sv.made.closeAfter(adapter)
			}
		}()
		out := &datapath.Served{
			Exposure:    datapath.Exposure{Undo: sv.undo},
			Checkpoints: sv.cp.snapshot,
			Fail: func(ctx context.Context, site testbed.Site) error {
				return sv.fail(ctx, site, servers, port)
			},
		}
		var target testbed.Target
		if len(servers) == 1 {
			sv.cp.expect = []string{results.PodReadySeconds, results.EndpointsReadySeconds}
			target, err = sv.discover(ctx, wctx, servers[0], port)
		} else {
			sv.cp.expect = []string{results.EndpointGoneSeconds, results.SwitchedSeconds}
			target, err = sv.redundant(ctx, wctx, client, servers, port)
		}
		if err != nil {
			return nil, err
		}
		out.Target = func(testbed.Site) testbed.Target { return target }
		return out, nil
	}
}

// start creates the server pod and its export Service in s, watching the
// pod and the Service's EndpointSlices from before they exist: onPod gets
// every state of the pod, onReady whether the export has a ready
// endpoint. It returns the Service as created.
func (sv *served) start(ctx, wctx context.Context, s Site, port int, onPod func(*corev1.Pod), onReady func(bool)) (*corev1.Service, error) {
	pod, err := servePod(s, port)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sv.adapter, err)
	}
	name := pod.Name
	if err := watchPod(wctx, s, name, onPod); err != nil {
		return nil, fmt.Errorf("%s: watch pod %s/%s in context %s: %w", sv.adapter, s.Namespace(), name, contextOf(s), err)
	}
	if err := watchReady(wctx, s, name, onReady); err != nil {
		return nil, fmt.Errorf("%s: watch endpointslices of service %s/%s in context %s: %w", sv.adapter, s.Namespace(), name, contextOf(s), err)
	}
	if _, err := sv.made.create(ctx, sv.adapter, object{site: s, gvr: podGVR, obj: toUnstructured(pod)}); err != nil {
		return nil, err
	}
	so := serviceObject(s, serveService(s, port, sv.typ))
	got, err := sv.made.create(ctx, sv.adapter, so)
	if err != nil {
		return nil, err
	}
	svc := &corev1.Service{}
	if err := fromUnstructured(got, svc); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", sv.adapter, so.describe(), err)
	}
	return svc, nil
}

// discover serves port in s alone and returns what a client dials: the
// node's IP and the nodePort (NodePort), or the pod's IP once the API
// server shows it (pod).
func (sv *served) discover(ctx, wctx context.Context, s Site, port int) (testbed.Target, error) {
	ipc := make(chan string, 1)
	onPod := func(p *corev1.Pod) {
		if p.Status.PodIP != "" {
			select {
			case ipc <- p.Status.PodIP:
			default:
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				sv.cp.mark(results.PodReadySeconds)
			}
		}
	}
	onReady := func(r bool) {
		if r {
			sv.cp.mark(results.EndpointsReadySeconds)
		}
	}
	svc, err := sv.start(ctx, wctx, s, port, onPod, onReady)
	if err != nil {
		return testbed.Target{}, err
	}
	if sv.typ == corev1.ServiceTypeNodePort {
		np := svcNodePort(svc, port)
		if np == 0 || s.Pod().Status.HostIP == "" {
			return testbed.Target{}, fmt.Errorf("%s: service %s/%s in context %s: no nodePort or no host IP", sv.adapter, svc.Namespace, svc.Name, contextOf(s))
		}
		return testbed.Target{Host: s.Pod().Status.HostIP, Port: np}, nil
	}
	select {
	case ip := <-ipc:
		return testbed.Target{Host: ip, Port: port}, nil
	case <-time.After(DefaultServeTimeout):
		return testbed.Target{}, fmt.Errorf("%s: timeout waiting for an IP of pod %s/%s in context %s after %v", sv.adapter, s.Namespace(), serveName(s, port), contextOf(s), DefaultServeTimeout)
	case <-ctx.Done():
		return testbed.Target{}, ctx.Err()
	}
}

// svcNodePort is the nodePort of svc's port.
func svcNodePort(svc *corev1.Service, port int) int {
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == port {
			return int(p.NodePort)
		}
	}
	return 0
}

// redundant serves port in both servers, waits until both are exported
// (endpoint ready), and routes client's cluster to them through a Service
// without selector whose EndpointSlice holds the first server (in order)
// whose export has a ready endpoint: a controller here watches both
// exports and moves the endpoint when that changes, delay after it saw
// the change, as a multicluster controller mirrors exported endpoints.
func (sv *served) redundant(ctx, wctx context.Context, client Site, servers []Site, port int) (testbed.Target, error) {
	type state struct {
		pod   *corev1.Pod
		ready bool
		to    testbed.Target
	}
	var mu sync.Mutex
	states := make([]state, len(servers))
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var svcs []*corev1.Service
	for i, s := range servers {
		svc, err := sv.start(ctx, wctx, s, port, func(p *corev1.Pod) {
			mu.Lock()
			states[i].pod = p
			mu.Unlock()
			poke()
		}, func(r bool) {
			mu.Lock()
			states[i].ready = r
			mu.Unlock()
			poke()
		})
		if err != nil {
			return testbed.Target{}, err
		}
		svcs = append(svcs, svc)
	}
	// What the client's cluster dials for each server: its pod's IP in
	// the client's own cluster or with the pod baseline; the node's IP and
	// the nodePort across clusters with NodePort.
	addr := func(i int, p *corev1.Pod) testbed.Target {
		if sv.typ == corev1.ServiceTypeNodePort && !sameCluster(servers[i], client) {
			if p.Status.HostIP == "" {
				return testbed.Target{}
			}
			return testbed.Target{Host: p.Status.HostIP, Port: svcNodePort(svcs[i], port)}
		}
		if p.Status.PodIP == "" {
			return testbed.Target{}
		}
		return testbed.Target{Host: p.Status.PodIP, Port: port}
	}
	deadline := time.After(DefaultServeTimeout)
	for {
		mu.Lock()
		done, why := true, ""
		for i := range states {
			if states[i].pod != nil {
				states[i].to = addr(i, states[i].pod)
			}
			if !states[i].ready || states[i].to.Host == "" {
				done = false
				why = fmt.Sprintf("pod %s/%s in context %s: exported endpoint ready %v, address %q", servers[i].Namespace(), serveName(servers[i], port), contextOf(servers[i]), states[i].ready, states[i].to.Host)
			}
		}
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			return testbed.Target{}, fmt.Errorf("%s: timeout waiting for both servers after %v (last: %s)", sv.adapter, DefaultServeTimeout, why)
		case <-ctx.Done():
			return testbed.Target{}, ctx.Err()
		}
	}
	got, err := sv.made.create(ctx, sv.adapter, serviceObject(client, importService(client, port)))
	if err != nil {
		return testbed.Target{}, err
	}
	ip, _, _ := unstructured.NestedString(got.Object, "spec", "clusterIP")
	if net.ParseIP(ip) == nil {
		return testbed.Target{}, fmt.Errorf("%s: service %s/%s in context %s has no cluster IP", sv.adapter, client.Namespace(), importName(port), contextOf(client))
	}
	mu.Lock()
	current := 0
	first := states[0].to
	mu.Unlock()
	slices := client.Clients().Kube.DiscoveryV1().EndpointSlices(client.Namespace())
	sl, err := slices.Create(ctx, importSlice(client, port, first), metav1.CreateOptions{})
	if err != nil {
		return testbed.Target{}, fmt.Errorf("%s: create endpointslice %s/%s in context %s: %w", sv.adapter, client.Namespace(), importName(port), contextOf(client), err)
	}
	sv.made.objs = append(sv.made.objs, object{site: client, gvr: sliceGVR, obj: toUnstructured(importSlice(client, port, first))})
	go func() {
		for {
			select {
			case <-wctx.Done():
				return
			case <-changed:
			}
			mu.Lock()
			want := -1
			for i := range states {
				if states[i].ready && states[i].to.Host != "" {
					want = i
					break
				}
			}
			var to testbed.Target
			if want >= 0 {
				to = states[want].to
			}
			mu.Unlock()
			if want == current {
				continue
			}
			if current >= 0 {
				sv.cp.mark(results.EndpointGoneSeconds)
			}
			select {
			case <-time.After(sv.delay):
			case <-wctx.Done():
				return
			}
			next := importSlice(client, port, to)
			next.ResourceVersion = sl.ResourceVersion
			uctx, cancel := context.WithTimeout(wctx, 10*time.Second)
			upd, err := slices.Update(uctx, next, metav1.UpdateOptions{})
			cancel()
			if err != nil {
				// Read it back and try again on the next change (or now).
				if cur, gerr := slices.Get(wctx, next.Name, metav1.GetOptions{}); gerr == nil {
					sl = cur
				}
				poke()
				continue
			}
			sl, current = upd, want
			if want >= 0 {
				sv.cp.mark(results.SwitchedSeconds)
			}
		}
	}()
	return testbed.Target{Host: ip, Port: port}, nil
}

// fromUnstructured converts what the API server answered into a typed
// object.
func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if u == nil {
		return errors.New("no object")
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}
