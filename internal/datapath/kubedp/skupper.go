package kubedp

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// SkupperName is the Skupper adapter's name.
const SkupperName = "skupper"

// Skupper's APIs.
const (
	SkupperV2 = "v2"
	SkupperV1 = "v1"
)

var skupperGV = schema.GroupVersion{Group: "skupper.io", Version: "v2alpha1"}

func skupperGVR(resource string) schema.GroupVersionResource { return skupperGV.WithResource(resource) }

var (
	secretGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// Skupper exposes the server through a Skupper network between the run's
// namespaces. With API v2 (skupper.io/v2alpha1, Skupper 2.x, whose
// controller watches every namespace) it makes each cluster's run
// namespace a Skupper Site, links the clients' sites to the server's
// (AccessGrant there, AccessToken from its status in the clients'), puts a
// Connector selecting the server's pod in the server's namespace and a
// Listener in each client's, both with the routing key spanperf-<run>,
// and waits until every Listener has a matching Connector; the client
// dials the Listener's host (spanperf-server, a Service the Listener
// makes in the client's namespace). With API v1 (Skupper 1.x's site
// controller) it makes the sites with the skupper-site ConfigMap, links
// them with a connection-token-request Secret the controller fills in,
// and exposes the server with the skupper.io/proxy and skupper.io/address
// annotations on its Service; the client dials the address.
type Skupper struct {
	// API is SkupperV2 or SkupperV1.
	API string
	// Timeout bounds each wait (grant, token, matching connector).
	Timeout time.Duration
	// RouterSelector selects the router pods in the run's namespaces (""
	// accounts none).
	RouterSelector string
}

var (
	_ datapath.Datapath = (*Skupper)(nil)
	_ kube.Shaper       = (*Skupper)(nil)
	_ kube.Preflighter  = (*Skupper)(nil)
)

// SkupperInfo registers Skupper.
func SkupperInfo() datapath.Info {
	return datapath.Info{
		Name:    SkupperName,
		Summary: "Kubernetes: Skupper; a Connector in the server's site, a Listener in the client's, the client dials the Listener's host",
		Options: []scenario.Field{
			{Name: "api", Kind: scenario.KindString, Default: SkupperV2, Enum: []string{SkupperV2, SkupperV1}, Doc: "Skupper's API: v2 (skupper.io/v2alpha1 Site, Listener, Connector) or v1 (site controller, annotated Service)"},
			{Name: "timeout", Kind: scenario.KindDuration, Default: DefaultExportTimeout, Doc: "how long each step (link, matching connector) may take"},
			selectorOption("router_selector", "skupper.io/component=router", "Skupper router"),
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			s := &Skupper{API: stringOpt(o, "api"), Timeout: durationOpt(o, "timeout", DefaultExportTimeout), RouterSelector: stringOpt(o, "router_selector")}
			if s.API == "" {
				s.API = SkupperV2
			}
			return s, s.Validate()
		},
		Components: declared("router"),
		Kube:       true,
	}
}

// Validate reports options the adapter cannot use.
func (s *Skupper) Validate() error {
	if s.API != SkupperV2 && s.API != SkupperV1 {
		return fmt.Errorf("%s: api %q (want %s or %s)", SkupperName, s.API, SkupperV2, SkupperV1)
	}
	if s.Timeout <= 0 {
		return fmt.Errorf("%s: timeout %s: want a positive duration", SkupperName, s.Timeout)
	}
	return checkSelector(SkupperName, "router_selector", s.RouterSelector)
}

// Shape lets the run's Role manage Skupper's objects in the namespaces.
func (s *Skupper) Shape(p *kube.PodShape) {
	verbs := []string{"get", "list", "watch", "create", "delete"}
	if s.API == SkupperV1 {
		p.Rules = append(p.Rules, servicesRule, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: verbs})
		return
	}
	p.Rules = append(p.Rules, rbacv1.PolicyRule{
		APIGroups: []string{skupperGV.Group},
		Resources: []string{"sites", "accessgrants", "accesstokens", "connectors", "listeners"},
		Verbs:     verbs,
	})
}

// Preflight checks, with API v2, that every cluster serves
// skupper.io/v2alpha1 (Sites, AccessGrants, AccessTokens, Connectors,
// Listeners). With v1 there is nothing to discover: a missing site
// controller shows as a timeout naming the site.
func (s *Skupper) Preflight(_ context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	cls, err := clusterSpecs(SkupperName, sites, cs)
	if err != nil {
		return err
	}
	if s.API == SkupperV1 {
		return nil
	}
	for _, c := range cls {
		if _, err := requireAPI(SkupperName, c.clients, c.site.Name, api{group: skupperGV.Group, versions: []string{skupperGV.Version}, resources: []string{"sites", "accessgrants", "accesstokens", "connectors", "listeners"}},
			"is Skupper v2 installed (its CRDs and controller; or use api: v1)?"); err != nil {
			return err
		}
	}
	return nil
}

// routingKey ties the Listeners to the Connector: one per run.
func routingKey(s Site) string { return "spanperf-" + runOf(s) }

// skupperSite is the Skupper Site in s's namespace; the server's accepts
// links.
func skupperSite(s Site, server bool) object {
	spec := map[string]any{}
	if server {
		spec["linkAccess"] = "default"
	}
	return newObject(s, skupperGVR("sites"), "Site", "spanperf-"+s.Name(), nil, spec)
}

// accessGrant lets n client sites link to the server's.
func accessGrant(server Site, n int) object {
	return newObject(server, skupperGVR("accessgrants"), "AccessGrant", "spanperf-grant", nil, map[string]any{
		"redemptionsAllowed": int64(n),
		"expirationWindow":   "1h",
	})
}

// accessToken redeems the grant whose status gave url, code and ca.
func accessToken(client Site, url, code, ca string) object {
	return newObject(client, skupperGVR("accesstokens"), "AccessToken", "spanperf-token", nil, map[string]any{
		"url": url, "code": code, "ca": ca,
	})
}

// connector binds the server's agent pod to the routing key.
func connector(server Site) object {
	return newObject(server, skupperGVR("connectors"), "Connector", ServiceName, nil, map[string]any{
		"routingKey": routingKey(server),
		"port":       int64(ServicePort),
		"selector":   selectorString(server.Selector()),
	})
}

// listener makes the host spanperf-server in client's namespace, routed
// to the connector.
func listener(client, server Site) object {
	return newObject(client, skupperGVR("listeners"), "Listener", ServiceName, nil, map[string]any{
		"routingKey": routingKey(server),
		"host":       ServiceName,
		"port":       int64(ServicePort),
	})
}

// v1 objects.

// v1Site is the skupper-site ConfigMap that makes s's namespace a
// Skupper 1.x site.
func v1Site(s Site) object {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "skupper-site", Namespace: s.Namespace(), Labels: runLabels(s, nil)},
		Data:       map[string]string{"name": "spanperf-" + s.Name()},
	}
	return object{site: s, gvr: configMapGVR, obj: toUnstructured(cm)}
}

// v1TokenRequest asks the server's site controller for a link token.
func v1TokenRequest(server Site) object {
	sec := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "spanperf-token", Namespace: server.Namespace(), Labels: runLabels(server, map[string]string{"skupper.io/type": "connection-token-request"})},
	}
	return object{site: server, gvr: secretGVR, obj: toUnstructured(sec)}
}

// v1Token is the token the server's controller generated, given to a
// client's site.
func v1Token(client Site, data map[string]any, annotations map[string]string) object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": "spanperf-token", "namespace": client.Namespace(),
			"labels":      toAny(runLabels(client, map[string]string{"skupper.io/type": "connection-token"})),
			"annotations": toAny(annotations),
		},
		"data": data,
	}}
	return object{site: client, gvr: secretGVR, obj: u}
}

// v1Service is the server's Service annotated for Skupper 1.x: the
// address spanperf-server, proxied as TCP.
func v1Service(server Site) object {
	return serviceObject(server, serviceSpec(server, server, corev1.ServiceTypeClusterIP, nil, map[string]string{
		"skupper.io/proxy":   "tcp",
		"skupper.io/address": ServiceName,
	}))
}

// Setup builds the Skupper network of the run's namespaces and exposes
// the server through it.
func (s *Skupper) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, SkupperName, s, tb)
}

func (s *Skupper) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	var made created
	fail := func(err error) (*datapath.Link, error) {
		made.closeAfter(SkupperName)
		return nil, err
	}
	if err := s.build(ctx, &made, sites); err != nil {
		return fail(err)
	}
	sets := []podSet{{kind: "skupper-router", role: "router", selector: s.RouterSelector, container: "router", option: "router_selector"}}
	comps, err := listComponents(ctx, SkupperName, sites, sets)
	if err != nil {
		return fail(err)
	}
	return withRefresh(&datapath.Link{
		Target:     targetsTo(server, testbed.Target{Host: ServiceName, Port: ServicePort}),
		Components: comps,
		Alive:      alive(SkupperName, sites, comps),
		Close:      func(ctx context.Context) error { return made.close(ctx, SkupperName) },
	}, SkupperName, sites, nil, sets), nil
}

// remoteClusters are the distinct clusters of the clients that are not
// the server's (a client in the server's cluster shares its namespace and
// so its Skupper site).
func remoteClusters(sites []Site) []Site {
	server, _ := serverOf(sites)
	var out []Site
	for _, c := range clusters(sites) {
		if !sameCluster(c, server) {
			out = append(out, c)
		}
	}
	return out
}

// skupperPlan is what the adapter creates, in order: first, then the
// tokens made from what the server's site answers (the v2 AccessGrant's
// status, the v1 token request's data), then the exposure.
type skupperPlan struct {
	// first makes the sites (and asks for a link token); grant is the
	// object whose answer the tokens need (nil when no client is in
	// another cluster).
	first []object
	grant *object
	// tokens makes the tokens of the clients' sites from the answer.
	tokens func(answer *unstructured.Unstructured) []object
	// expose binds the server to the clients' hosts; wait are the objects
	// whose status says the binding is made (v2 Listeners).
	expose, wait []object
}

// plan is what the adapter creates on sites.
func (s *Skupper) plan(sites []Site) skupperPlan {
	server, clients := serverOf(sites)
	remotes := remoteClusters(sites)
	var p skupperPlan
	if s.API == SkupperV1 {
		for _, c := range clusters(sites) {
			p.first = append(p.first, v1Site(c))
		}
		if len(remotes) > 0 {
			req := v1TokenRequest(server)
			p.first = append(p.first, req)
			p.grant = &req
		}
		p.tokens = func(tok *unstructured.Unstructured) []object {
			data, _, _ := unstructured.NestedMap(tok.Object, "data")
			var out []object
			for _, c := range remotes {
				out = append(out, v1Token(c, data, tok.GetAnnotations()))
			}
			return out
		}
		p.expose = []object{v1Service(server)}
		return p
	}
	p.first = append(p.first, skupperSite(server, true))
	for _, c := range remotes {
		p.first = append(p.first, skupperSite(c, false))
	}
	if len(remotes) > 0 {
		grant := accessGrant(server, len(remotes))
		p.first = append(p.first, grant)
		p.grant = &grant
	}
	p.tokens = func(g *unstructured.Unstructured) []object {
		url, _, _ := unstructured.NestedString(g.Object, "status", "url")
		code, _, _ := unstructured.NestedString(g.Object, "status", "code")
		ca, _, _ := unstructured.NestedString(g.Object, "status", "ca")
		var out []object
		for _, c := range remotes {
			out = append(out, accessToken(c, url, code, ca))
		}
		return out
	}
	p.expose = []object{connector(server)}
	for _, c := range clusters(clients) {
		l := listener(c, server)
		p.expose = append(p.expose, l)
		p.wait = append(p.wait, l)
	}
	return p
}

// answered tells whether the server's site has answered the grant (v2:
// the AccessGrant's status has url, code and ca; v1: the site controller
// turned the request into a connection-token), and if not why.
func (s *Skupper) answered(u *unstructured.Unstructured) (bool, string) {
	if s.API == SkupperV1 {
		if u.GetLabels()["skupper.io/type"] != "connection-token" {
			return false, "still a connection-token-request (is Skupper 1.x's site controller running?)"
		}
		return true, ""
	}
	for _, f := range []string{"url", "code", "ca"} {
		if v, _, _ := unstructured.NestedString(u.Object, "status", f); v == "" {
			return false, "no status." + f + " yet; " + statusLine(u)
		}
	}
	return true, ""
}

// build creates the plan: the sites, the tokens once the grant is
// answered, the exposure, and waits until every Listener has a matching
// Connector.
func (s *Skupper) build(ctx context.Context, made *created, sites []Site) error {
	p := s.plan(sites)
	for _, o := range p.first {
		if _, err := made.create(ctx, SkupperName, o); err != nil {
			return err
		}
	}
	if p.grant != nil {
		var answer *unstructured.Unstructured
		err := waitFor(ctx, p.grant.describe()+" to be answered", s.Timeout, time.Second, func(ctx context.Context) (bool, string, error) {
			u, err := get(ctx, *p.grant)
			if err != nil {
				return false, err.Error(), nil
			}
			ok, why := s.answered(u)
			answer = u
			return ok, why, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", SkupperName, err)
		}
		for _, o := range p.tokens(answer) {
			if _, err := made.create(ctx, SkupperName, o); err != nil {
				return err
			}
		}
	}
	for _, o := range p.expose {
		if _, err := made.create(ctx, SkupperName, o); err != nil {
			return err
		}
	}
	for _, l := range p.wait {
		err := waitFor(ctx, l.describe()+" to have a matching connector", s.Timeout, time.Second, func(ctx context.Context) (bool, string, error) {
			u, err := get(ctx, l)
			if err != nil {
				return false, err.Error(), nil
			}
			match, _, _ := unstructured.NestedBool(u.Object, "status", "hasMatchingConnector")
			return match, statusLine(u), nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", SkupperName, err)
		}
	}
	return nil
}

// statusLine is a Skupper object's status and message, for errors.
func statusLine(u *unstructured.Unstructured) string {
	st, _, _ := unstructured.NestedString(u.Object, "status", "status")
	msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
	if st == "" && msg == "" {
		return "no status yet (is the Skupper controller running?); " + formatConditions(conditions(u))
	}
	return fmt.Sprintf("status %s: %s; %s", st, msg, formatConditions(conditions(u)))
}
