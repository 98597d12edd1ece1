package kubedp

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Names of the service-mesh and CNI adapters.
const (
	IstioName   = "istio"
	CiliumName  = "cilium"
	LinkerdName = "linkerd"
)

// Istio's data-plane modes.
const (
	IstioSidecar = "sidecar"
	IstioAmbient = "ambient"
)

// Istio exposes the server through an Istio multicluster mesh: the Service
// exists in the run's namespace of every cluster (multi-primary: each
// cluster's control plane learns the server's endpoint from the other);
// in sidecar mode the namespaces carry the injection label (or the
// revision's), in ambient mode istio.io/dataplane-mode=ambient and the
// Service istio.io/global="true". The client dials
// spanperf-server.<ns>.svc.cluster.local.
type Istio struct {
	// Mode is IstioSidecar or IstioAmbient.
	Mode string
	// Revision, in sidecar mode, labels the namespaces istio.io/rev=<rev>
	// in place of istio-injection=enabled.
	Revision string
	// Namespace holds the east-west gateway and ztunnel pods.
	Namespace string
	// GatewaySelector selects the east-west gateways, ZtunnelSelector the
	// ztunnel pods (ambient mode) ("" accounts none).
	GatewaySelector, ZtunnelSelector string
}

var (
	_ datapath.Datapath = (*Istio)(nil)
	_ kube.Shaper       = (*Istio)(nil)
	_ kube.Preflighter  = (*Istio)(nil)
)

// IstioInfo registers Istio.
func IstioInfo() datapath.Info {
	return datapath.Info{
		Name:    IstioName,
		Summary: "Kubernetes: Istio multicluster (sidecar multi-primary or ambient); the client dials <svc>.<ns>.svc.cluster.local",
		Options: []scenario.Field{
			{Name: "mode", Kind: scenario.KindString, Default: IstioSidecar, Enum: []string{IstioSidecar, IstioAmbient}, Doc: "Istio's data plane: sidecar proxies or ambient (ztunnel)"},
			{Name: "revision", Kind: scenario.KindString, Default: "", Doc: "sidecar mode: label the namespaces istio.io/rev=REVISION instead of istio-injection=enabled"},
			namespaceOption("namespace", "istio-system", "east-west gateway and ztunnel"),
			selectorOption("gateway_selector", "istio=eastwestgateway", "east-west gateway"),
			selectorOption("ztunnel_selector", "app=ztunnel", "ztunnel (ambient mode)"),
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			i := &Istio{
				Mode:            stringOpt(o, "mode"),
				Revision:        stringOpt(o, "revision"),
				Namespace:       stringOpt(o, "namespace"),
				GatewaySelector: stringOpt(o, "gateway_selector"),
				ZtunnelSelector: stringOpt(o, "ztunnel_selector"),
			}
			if i.Mode == "" {
				i.Mode = IstioSidecar
			}
			return i, i.Validate()
		},
		Components: func(o map[string]any, sites int) []scenario.Component {
			if stringOpt(o, "mode") == IstioAmbient {
				return declared("gateway", "ztunnel")(o, sites)
			}
			return declared("gateway", "sidecar")(o, sites)
		},
		Kube: true,
	}
}

// Validate reports options the adapter cannot use.
func (i *Istio) Validate() error {
	switch i.Mode {
	case IstioSidecar:
	case IstioAmbient:
		if i.Revision != "" {
			return fmt.Errorf("%s: revision %q is for mode sidecar, not ambient", IstioName, i.Revision)
		}
	default:
		return fmt.Errorf("%s: mode %q (want %s or %s)", IstioName, i.Mode, IstioSidecar, IstioAmbient)
	}
	if i.Revision != "" {
		if err := checkName(IstioName, "revision", i.Revision); err != nil {
			return err
		}
	}
	if err := checkName(IstioName, "namespace", i.Namespace); err != nil {
		return err
	}
	if err := checkSelector(IstioName, "gateway_selector", i.GatewaySelector); err != nil {
		return err
	}
	return checkSelector(IstioName, "ztunnel_selector", i.ZtunnelSelector)
}

// Shape labels the run's namespaces for Istio's data plane and lets the
// Role create the Services.
func (i *Istio) Shape(p *kube.PodShape) {
	if p.NamespaceLabels == nil {
		p.NamespaceLabels = map[string]string{}
	}
	switch {
	case i.Mode == IstioAmbient:
		p.NamespaceLabels["istio.io/dataplane-mode"] = "ambient"
	case i.Revision != "":
		p.NamespaceLabels["istio.io/rev"] = i.Revision
	default:
		p.NamespaceLabels["istio-injection"] = "enabled"
	}
	p.Rules = append(p.Rules, servicesRule)
}

// Preflight checks that every cluster runs Istio (networking.istio.io)
// and, in ambient mode, ztunnel.
func (i *Istio) Preflight(ctx context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	cls, err := clusterSpecs(IstioName, sites, cs)
	if err != nil {
		return err
	}
	for _, c := range cls {
		if _, err := requireAPI(IstioName, c.clients, c.site.Name, api{group: "networking.istio.io", versions: []string{"v1", "v1beta1"}, resources: []string{"gateways"}},
			"is Istio installed (multi-primary, with the east-west gateway)?"); err != nil {
			return err
		}
		if i.Mode == IstioAmbient && i.ZtunnelSelector != "" {
			list, err := c.clients.Kube.CoreV1().Pods(i.Namespace).List(ctx, metav1.ListOptions{LabelSelector: i.ZtunnelSelector, Limit: 1})
			if err != nil {
				return fmt.Errorf("%s: list ztunnel pods (%s) in namespace %s of context %s (site %s): %w", IstioName, i.ZtunnelSelector, i.Namespace, c.clients.Context, c.site.Name, err)
			}
			if len(list.Items) == 0 {
				return fmt.Errorf("%s: no ztunnel pods (%s) in namespace %s of context %s (site %s): is Istio installed with the ambient profile?", IstioName, i.ZtunnelSelector, i.Namespace, c.clients.Context, c.site.Name)
			}
		}
	}
	return nil
}

// objects are the Services Istio's adapter creates: one in the run's
// namespace of every cluster, selecting the server's pod.
func (i *Istio) objects(sites []Site) []object {
	server, _ := serverOf(sites)
	var lbl map[string]string
	if i.Mode == IstioAmbient {
		lbl = map[string]string{"istio.io/global": "true"}
	}
	var out []object
	for _, s := range clusters(sites) {
		out = append(out, serviceObject(s, serviceSpec(s, server, corev1.ServiceTypeClusterIP, lbl, nil)))
	}
	return out
}

// Setup creates the Services and finds the components.
func (i *Istio) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, IstioName, i, tb)
}

func (i *Istio) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	sets := []podSet{{kind: "istio-eastwestgateway", role: "gateway", namespace: i.Namespace, selector: i.GatewaySelector, option: "gateway_selector"}}
	var comps []results.Component
	if i.Mode == IstioAmbient {
		sets = append(sets, podSet{kind: "ztunnel", role: "ztunnel", namespace: i.Namespace, selector: i.ZtunnelSelector, agentNodes: true, option: "ztunnel_selector"})
	} else {
		sc, err := sidecars(IstioName, "istio-proxy", "sidecar", "is the namespace's injection label (istio-injection or istio.io/rev) honoured by istiod's webhook?", sites)
		if err != nil {
			return nil, err
		}
		comps = sc
	}
	return exposeServices(ctx, IstioName, sites, i.objects(sites), sets, comps,
		testbed.Target{Host: clusterLocal(server), Port: ServicePort}, nil)
}

// exposeServices creates objs, waits with ready when set, finds the
// components of sets, and returns the link to target.
func exposeServices(ctx context.Context, name string, sites []Site, objs []object, sets []podSet, comps []results.Component, target testbed.Target, ready func(ctx context.Context) error) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	var made created
	fail := func(err error) (*datapath.Link, error) {
		made.closeAfter(name)
		return nil, err
	}
	for _, o := range objs {
		if _, err := made.create(ctx, name, o); err != nil {
			return fail(err)
		}
	}
	if ready != nil {
		if err := ready(ctx); err != nil {
			return fail(err)
		}
	}
	fixed := slices.Clone(comps)
	found, err := listComponents(ctx, name, sites, sets)
	if err != nil {
		return fail(err)
	}
	comps = append(comps, found...)
	return withRefresh(&datapath.Link{
		Target:     targetsTo(server, target),
		Components: comps,
		Alive:      alive(name, sites, comps),
		Close:      func(ctx context.Context) error { return made.close(ctx, name) },
	}, name, sites, fixed, sets), nil
}

// Cilium exposes the server as a Cilium ClusterMesh global service: the
// Service, annotated service.cilium.io/global="true", in the run's
// namespace of every cluster; the client dials the local Service's name
// (spanperf-server), whose backends Cilium merges across the clusters.
type Cilium struct {
	// Namespace holds the Cilium agents.
	Namespace string
	// AgentSelector selects the Cilium agent pods ("" accounts none).
	AgentSelector string
}

var (
	_ datapath.Datapath = (*Cilium)(nil)
	_ kube.Shaper       = (*Cilium)(nil)
	_ kube.Preflighter  = (*Cilium)(nil)
)

// CiliumInfo registers Cilium.
func CiliumInfo() datapath.Info {
	return datapath.Info{
		Name:    CiliumName,
		Summary: "Kubernetes: Cilium ClusterMesh global service (service.cilium.io/global); the client dials the local Service",
		Options: []scenario.Field{
			namespaceOption("namespace", "kube-system", "Cilium agent"),
			selectorOption("agent_selector", "k8s-app=cilium", "Cilium agent"),
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			c := &Cilium{Namespace: stringOpt(o, "namespace"), AgentSelector: stringOpt(o, "agent_selector")}
			return c, c.Validate()
		},
		Components: declared("agent"),
		Kube:       true,
	}
}

// Validate reports options the adapter cannot use.
func (c *Cilium) Validate() error {
	if err := checkName(CiliumName, "namespace", c.Namespace); err != nil {
		return err
	}
	return checkSelector(CiliumName, "agent_selector", c.AgentSelector)
}

// Shape lets the run's Role create the Services.
func (c *Cilium) Shape(p *kube.PodShape) { p.Rules = append(p.Rules, servicesRule) }

// Preflight checks that every cluster runs Cilium (cilium.io/v2).
func (c *Cilium) Preflight(_ context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	cls, err := clusterSpecs(CiliumName, sites, cs)
	if err != nil {
		return err
	}
	for _, cl := range cls {
		if _, err := requireAPI(CiliumName, cl.clients, cl.site.Name, api{group: "cilium.io", versions: []string{"v2"}, resources: []string{"ciliumendpoints"}},
			"is Cilium the CNI, with ClusterMesh connected?"); err != nil {
			return err
		}
	}
	return nil
}

// objects are the global Services, one per cluster.
func (c *Cilium) objects(sites []Site) []object {
	server, _ := serverOf(sites)
	var out []object
	for _, s := range clusters(sites) {
		out = append(out, serviceObject(s, serviceSpec(s, server, corev1.ServiceTypeClusterIP, nil, map[string]string{"service.cilium.io/global": "true"})))
	}
	return out
}

// Setup creates the global Services and finds the agents.
func (c *Cilium) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, CiliumName, c, tb)
}

func (c *Cilium) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	sets := []podSet{{kind: "cilium-agent", role: "agent", namespace: c.Namespace, selector: c.AgentSelector, container: "cilium-agent", agentNodes: true, option: "agent_selector"}}
	return exposeServices(ctx, CiliumName, sites, c.objects(sites), sets, nil, testbed.Target{Host: ServiceName, Port: ServicePort}, nil)
}

// linkGVR is Linkerd's Link, in the versions Linkerd has served.
var linkAPI = api{group: "multicluster.linkerd.io", versions: []string{"v1alpha3", "v1alpha2", "v1alpha1"}, resources: []string{"links"}}

// Linkerd exposes the server through Linkerd's multicluster service
// mirroring: the Service, labelled mirror.linkerd.io/exported="true", in
// the server's namespace; the Link of the client's cluster (named after
// the server's cluster, option link) mirrors it as spanperf-server-<link>
// in the client's namespace, which the client dials
// (spanperf-server-<link>.<ns>.svc.cluster.local). The agent pods are
// meshed (linkerd.io/inject: enabled).
type Linkerd struct {
	// Link is the name of the Link in the client's cluster (the server's
	// cluster's name there).
	Link string
	// LinkNamespace holds the Link and the gateway.
	LinkNamespace string
	// GatewaySelector selects the gateway pods ("" accounts none).
	GatewaySelector string
	// Timeout bounds the wait for the mirror Service.
	Timeout time.Duration
}

var (
	_ datapath.Datapath = (*Linkerd)(nil)
	_ kube.Shaper       = (*Linkerd)(nil)
	_ kube.Preflighter  = (*Linkerd)(nil)
)

// LinkerdInfo registers Linkerd.
func LinkerdInfo() datapath.Info {
	return datapath.Info{
		Name:    LinkerdName,
		Summary: "Kubernetes: Linkerd multicluster mirroring (mirror.linkerd.io/exported); the client dials <svc>-<link>",
		Options: []scenario.Field{
			{Name: "link", Kind: scenario.KindString, Required: true, Doc: "the Link's name in the client's cluster (the server cluster's name there)"},
			namespaceOption("link_namespace", "linkerd-multicluster", "Linkerd multicluster gateway (and the Link's)"),
			selectorOption("gateway_selector", "app=linkerd-gateway", "Linkerd multicluster gateway"),
			{Name: "timeout", Kind: scenario.KindDuration, Default: DefaultExportTimeout, Doc: "how long to wait for the mirror Service"},
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			l := &Linkerd{
				Link:            stringOpt(o, "link"),
				LinkNamespace:   stringOpt(o, "link_namespace"),
				GatewaySelector: stringOpt(o, "gateway_selector"),
				Timeout:         durationOpt(o, "timeout", DefaultExportTimeout),
			}
			return l, l.Validate()
		},
		Components: declared("sidecar", "gateway"),
		Kube:       true,
	}
}

// errNoLink is the error of an adapter without its Link's name. The
// scenario parser already refuses a linkerd entry without link (the
// option is Required); New accepts it so that `spanperf doctor` can make
// the adapter from its defaults, and Preflight and Setup refuse it.
var errNoLink = fmt.Errorf("%s: option link is required: the Link's name in the client's cluster", LinkerdName)

// Validate reports options the adapter cannot use; an empty link is left
// to Preflight (see errNoLink).
func (l *Linkerd) Validate() error {
	if l.Link != "" {
		if err := checkName(LinkerdName, "link", l.Link); err != nil {
			return err
		}
	}
	if err := checkName(LinkerdName, "link_namespace", l.LinkNamespace); err != nil {
		return err
	}
	if l.Timeout <= 0 {
		return fmt.Errorf("%s: timeout %s: want a positive duration", LinkerdName, l.Timeout)
	}
	return checkSelector(LinkerdName, "gateway_selector", l.GatewaySelector)
}

// Shape meshes the agent pods and lets the Role create the Service.
func (l *Linkerd) Shape(p *kube.PodShape) {
	if p.PodAnnotations == nil {
		p.PodAnnotations = map[string]string{}
	}
	p.PodAnnotations["linkerd.io/inject"] = "enabled"
	p.Rules = append(p.Rules, servicesRule)
}

// Preflight checks that every cluster runs Linkerd (linkerd.io) and that
// each client's cluster has the Link named by the option link.
func (l *Linkerd) Preflight(ctx context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	if l.Link == "" {
		return errNoLink
	}
	cls, err := clusterSpecs(LinkerdName, sites, cs)
	if err != nil {
		return err
	}
	for _, c := range cls {
		if _, err := requireAPI(LinkerdName, c.clients, c.site.Name, api{group: "linkerd.io", versions: []string{"v1alpha2"}, resources: []string{"serviceprofiles"}},
			"is Linkerd installed?"); err != nil {
			return err
		}
		if !c.client || c.server {
			continue
		}
		v, err := requireAPI(LinkerdName, c.clients, c.site.Name, linkAPI, "is the linkerd-multicluster extension installed?")
		if err != nil {
			return err
		}
		gvr := schema.GroupVersionResource{Group: linkAPI.group, Version: v, Resource: "links"}
		_, err = c.clients.Dynamic.Resource(gvr).Namespace(l.LinkNamespace).Get(ctx, l.Link, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: context %s (site %s) has no Link %s/%s: link the server's cluster (linkerd multicluster link --cluster-name %s)", LinkerdName, c.clients.Context, c.site.Name, l.LinkNamespace, l.Link, l.Link)
		}
		if err != nil {
			return fmt.Errorf("%s: get Link %s/%s in context %s (site %s): %w", LinkerdName, l.LinkNamespace, l.Link, c.clients.Context, c.site.Name, err)
		}
	}
	return nil
}

// objects is the exported Service in the server's namespace.
func (l *Linkerd) objects(sites []Site) []object {
	server, _ := serverOf(sites)
	return []object{serviceObject(server, serviceSpec(server, server, corev1.ServiceTypeClusterIP, map[string]string{"mirror.linkerd.io/exported": "true"}, nil))}
}

// mirror is the name of the mirror Service in the client's cluster.
func (l *Linkerd) mirror() string { return ServiceName + "-" + l.Link }

// Setup exports the Service and waits for its mirror in every client's
// cluster.
func (l *Linkerd) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, LinkerdName, l, tb)
}

func (l *Linkerd) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	if l.Link == "" {
		return nil, errNoLink
	}
	server, clients := serverOf(sites)
	comps, err := sidecars(LinkerdName, "linkerd-proxy", "sidecar", "is the proxy injector running (linkerd.io/inject: enabled on the pod)?", sites)
	if err != nil {
		return nil, err
	}
	ready := func(ctx context.Context) error {
		for _, c := range clusters(clients) {
			if sameCluster(c, server) {
				continue
			}
			what := fmt.Sprintf("mirror service %s/%s in context %s (Link %s)", c.Namespace(), l.mirror(), contextOf(c), l.Link)
			err := waitFor(ctx, what, l.Timeout, time.Second, func(ctx context.Context) (bool, string, error) {
				_, err := c.Clients().Kube.CoreV1().Services(c.Namespace()).Get(ctx, l.mirror(), metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return true, "", nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", LinkerdName, err)
			}
		}
		return nil
	}
	sets := []podSet{{kind: "linkerd-gateway", role: "gateway", namespace: l.LinkNamespace, selector: l.GatewaySelector, serverOnly: true, option: "gateway_selector"}}
	link, err := exposeServices(ctx, LinkerdName, sites, l.objects(sites), sets, comps,
		testbed.Target{Host: l.mirror() + "." + server.Namespace() + ".svc.cluster.local", Port: ServicePort}, ready)
	if err != nil {
		return nil, err
	}
	// A client in the server's own cluster has no mirror: it dials the
	// exported Service itself.
	local := map[string]bool{}
	for _, s := range sites {
		local[s.Name()] = sameCluster(s, server)
	}
	remote := link.Target
	inCluster := targetsTo(server, testbed.Target{Host: clusterLocal(server), Port: ServicePort})
	link.Target = func(from, to testbed.Site, port int) testbed.Target {
		if from != nil && local[from.Name()] {
			return inCluster(from, to, port)
		}
		return remote(from, to, port)
	}
	return link, nil
}
