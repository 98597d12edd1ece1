// Package kubedp holds the Kubernetes exposure adapters: the datapaths that
// expose the server of a run on Kubernetes sites (testbed/kube) to its
// clients, either plainly (pod IP, host network, ClusterIP, NodePort,
// LoadBalancer: the baselines) or through the multicluster solution
// installed in the clusters (Skupper, Submariner, Istio, Cilium, Linkerd).
//
// The runner places the client in the first site and the server in the
// last (runner.Endpoints); an adapter exposes the last site's agent pod.
// Every Service an adapter makes exposes agent.DefaultPort, the port every
// pod workload's server listens on, under the same port number; Link.Target
// of a Service maps agent.DefaultPort to what the client dials (the
// Service's port, or the allocated nodePort) and leaves other ports as
// they are. Link.Target of any site other than the server's is the zero
// Target, which the agent refuses: only the server is exposed.
//
// What an adapter creates goes into the run's namespaces, labelled with
// the run ID (kube.LabelRun); Link.Close deletes it, and the namespace's
// deletion at the end of the run catches anything left.
package kubedp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Site is what an adapter uses of a Kubernetes site; *kube.Site has
// exactly these methods.
type Site interface {
	// Name is the scenario's site name.
	Name() string
	// Spec is the site's spec (context, kubeconfig, placement).
	Spec() kube.SiteSpec
	// Clients are the API clients of the site's cluster.
	Clients() *kube.Clients
	// Namespace is the run's namespace in the site's cluster.
	Namespace() string
	// Pod is the site's agent pod as it was when Ready.
	Pod() *corev1.Pod
	// Selector selects exactly the site's agent pod.
	Selector() map[string]string
}

var _ Site = (*kube.Site)(nil)

// ServiceName is the name of the Service an adapter makes for the server.
const ServiceName = "spanperf-server"

// ServicePort is the port a Service an adapter makes exposes: the agent
// server's port in every pod workload.
const ServicePort = agent.DefaultPort

// closeTimeout bounds Link.Close when its context has no deadline.
const closeTimeout = 30 * time.Second

// adapter is an exposure adapter's logic on sites; Setup converts the
// testbed's sites and calls it.
type adapter interface {
	setup(ctx context.Context, sites []Site) (*datapath.Link, error)
}

// sitesOf returns the Kubernetes sites of tb, or an error naming the
// adapter when tb is not a Kubernetes testbed.
func sitesOf(name string, tb testbed.Testbed) ([]Site, error) {
	ktb, ok := tb.(*kube.Testbed)
	if !ok {
		return nil, fmt.Errorf("%s: runs only on Kubernetes sites (sites with a context)", name)
	}
	var out []Site
	for _, s := range ktb.KubeSites() {
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the testbed has no sites", name)
	}
	return out, nil
}

// setupOn is Setup of an adapter: tb's sites, then a.setup.
func setupOn(ctx context.Context, name string, a adapter, tb testbed.Testbed) (*datapath.Link, error) {
	sites, err := sitesOf(name, tb)
	if err != nil {
		return nil, err
	}
	return a.setup(ctx, sites)
}

// runOf is the run ID of a site: its namespace without the "spanperf-"
// prefix.
func runOf(s Site) string { return strings.TrimPrefix(s.Namespace(), kube.Namespace("")) }

// context names a site's cluster in errors.
func contextOf(s Site) string {
	if c := s.Clients(); c != nil && c.Context != "" {
		return c.Context
	}
	return s.Spec().Context
}

// sameCluster tells whether two sites are in one cluster (one context of
// one kubeconfig).
func sameCluster(a, b Site) bool {
	return contextOf(a) == contextOf(b) && a.Spec().Kubeconfig == b.Spec().Kubeconfig
}

// clusters returns one site per distinct cluster among sites, in order.
func clusters(sites []Site) []Site {
	var out []Site
next:
	for _, s := range sites {
		for _, o := range out {
			if sameCluster(s, o) {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// serverOf splits sites into the server's (the last) and the clients'.
func serverOf(sites []Site) (server Site, clients []Site) {
	return sites[len(sites)-1], sites[:len(sites)-1]
}

// targetsTo makes a Link.Target that answers t for the server site and
// the zero Target for every other site; a port other than ServicePort is
// kept as it is.
func targetsTo(server Site, t testbed.Target) func(from, to testbed.Site, port int) testbed.Target {
	return func(_, to testbed.Site, port int) testbed.Target {
		if to == nil || to.Name() != server.Name() {
			return testbed.Target{}
		}
		if port != ServicePort {
			return testbed.Target{Host: t.Host, Port: port}
		}
		return t
	}
}

// runLabels are the labels on everything an adapter creates.
func runLabels(s Site, extra map[string]string) map[string]string {
	l := map[string]string{kube.LabelRun: runOf(s)}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// serviceSpec is the Service that exposes the server's agent pod in site
// s's namespace (the selector matches nothing in another cluster than the
// server's, which is what a global Service of Cilium or Istio wants on the
// client's side).
func serviceSpec(s, server Site, typ corev1.ServiceType, labels, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServiceName,
			Namespace:   s.Namespace(),
			Labels:      runLabels(s, labels),
			Annotations: annotations,
		},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: server.Selector(),
			Ports: []corev1.ServicePort{{
				Name: "agent", Protocol: corev1.ProtocolTCP,
				Port: ServicePort, TargetPort: intstr.FromInt32(ServicePort),
			}},
		},
	}
}

// object is one object an adapter creates, in a site's cluster and
// namespace.
type object struct {
	site Site
	gvr  schema.GroupVersionResource
	obj  *unstructured.Unstructured
}

var serviceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// serviceObject makes an object of a Service.
func serviceObject(s Site, svc *corev1.Service) object {
	return object{site: s, gvr: serviceGVR, obj: toUnstructured(svc)}
}

// toUnstructured converts a typed object, without its empty status and
// creation time.
func toUnstructured(o runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		panic(fmt.Sprintf("kubedp: convert %T: %v", o, err)) // only our own types
	}
	unstructured.RemoveNestedField(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: m}
}

// newObject makes a third-party object (a CRD's) without its Go type.
func newObject(s Site, gvr schema.GroupVersionResource, kind, name string, labels map[string]string, spec map[string]any) object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata": map[string]any{
			"name":      name,
			"namespace": s.Namespace(),
			"labels":    toAny(runLabels(s, labels)),
		},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return object{site: s, gvr: gvr, obj: u}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// describe names an object and where it is, for errors.
func (o object) describe() string {
	return fmt.Sprintf("%s %s/%s in context %s", strings.ToLower(o.obj.GetKind()), o.obj.GetNamespace(), o.obj.GetName(), contextOf(o.site))
}

// created are the objects an adapter has made, deleted in reverse by
// Close.
type created struct {
	objs []object
}

// create makes o in its site's cluster and returns it as the API server
// answered.
func (c *created) create(ctx context.Context, name string, o object) (*unstructured.Unstructured, error) {
	cl := o.site.Clients()
	if cl == nil || cl.Dynamic == nil {
		return nil, fmt.Errorf("%s: create %s: site %s has no clients", name, o.describe(), o.site.Name())
	}
	got, err := cl.Dynamic.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Create(ctx, o.obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: create %s: %w", name, o.describe(), err)
	}
	c.objs = append(c.objs, o)
	return got, nil
}

// get reads o back.
func get(ctx context.Context, o object) (*unstructured.Unstructured, error) {
	return o.site.Clients().Dynamic.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Get(ctx, o.obj.GetName(), metav1.GetOptions{})
}

// close deletes what was created, newest first, within ctx (bounded by
// closeTimeout when ctx has no deadline); what is already gone is no
// error.
func (c *created) close(ctx context.Context, name string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}
	var errs []error
	for i := len(c.objs) - 1; i >= 0; i-- {
		o := c.objs[i]
		err := o.site.Clients().Dynamic.Resource(o.gvr).Namespace(o.obj.GetNamespace()).Delete(ctx, o.obj.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: delete %s: %w", name, o.describe(), err))
		}
	}
	c.objs = nil
	return errors.Join(errs...)
}

// closeAfter runs c.close with a fresh bounded context, for cleaning up
// after a failed setup whose ctx may have ended.
func (c *created) closeAfter(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.close(ctx, name)
}

// waitFor polls cond every interval until it answers true, an error that
// is final, or timeout (a request in flight then may overrun it by its own
// time limit); on timeout the error names what was awaited and the
// last reason cond gave ("timeout waiting for X after D, last: ...").
func waitFor(ctx context.Context, what string, timeout, interval time.Duration, cond func(ctx context.Context) (done bool, reason string, err error)) error {
	var last string
	parent := ctx
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		// cond's requests run under the caller's ctx, not the wait's
		// deadline (each is bounded by the client's own timeout): a last
		// request cut short by that deadline would replace the reason
		// with "context deadline exceeded".
		done, reason, err := cond(parent)
		if reason != "" {
			last = reason
		}
		return done, err
	})
	if err == nil {
		return nil
	}
	if wait.Interrupted(err) {
		if last == "" {
			last = "no answer"
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w (last: %s)", what, ctx.Err(), last)
		}
		return fmt.Errorf("timeout waiting for %s after %s (last: %s)", what, timeout, last)
	}
	return err
}

// conditions reads status.conditions of u as type → (status, reason:
// message).
func conditions(u *unstructured.Unstructured) map[string][2]string {
	out := map[string][2]string{}
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		st, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		out[t] = [2]string{st, strings.TrimSpace(r + ": " + msg)}
	}
	return out
}

// formatConditions renders conditions for an error, sorted by type.
func formatConditions(c map[string][2]string) string {
	if len(c) == 0 {
		return "no conditions yet"
	}
	var parts []string
	for t, v := range c {
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", t, v[0], strings.Trim(v[1], ": ")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// selectorString renders a label set as "k=v,k2=v2", sorted.
func selectorString(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// kernelOnly is the components of a baseline: the kernel.
func kernelOnly() []results.Component { return []results.Component{datapath.KernelComponent()} }

// kernelDeclared declares the kernel as a baseline's only component.
func kernelDeclared(map[string]any, int) []scenario.Component {
	return []scenario.Component{{Name: datapath.KernelComponent().Name, Role: "kernel"}}
}

// stringOpt is opts[name] as a string.
func stringOpt(opts map[string]any, name string) string {
	s, _ := opts[name].(string)
	return s
}

// durationOpt is opts[name] as a duration, def when unset.
func durationOpt(opts map[string]any, name string, def time.Duration) time.Duration {
	if d, ok := opts[name].(time.Duration); ok {
		return d
	}
	return def
}
