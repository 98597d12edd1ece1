package kubedp

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// SubmarinerName is the Submariner adapter's name.
const SubmarinerName = "submariner"

// DefaultExportTimeout bounds the wait for a solution to export the
// server.
const DefaultExportTimeout = 2 * time.Minute

var serviceExportGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "serviceexports"}

// Submariner exposes the server through Submariner's Lighthouse: a
// ClusterIP Service and its ServiceExport (the Multi-Cluster Services
// API) in the server's namespace; the client dials
// spanperf-server.<ns>.svc.clusterset.local, which Lighthouse resolves in
// the client's cluster (the run's namespace has one name in every
// cluster).
type Submariner struct {
	// Timeout bounds the wait for the export's Ready condition.
	Timeout time.Duration
	// Namespace holds Submariner's pods.
	Namespace string
	// GatewaySelector selects the gateway pods, RouteAgentSelector the
	// route agents ("" accounts none).
	GatewaySelector, RouteAgentSelector string
}

var (
	_ datapath.Datapath = (*Submariner)(nil)
	_ kube.Shaper       = (*Submariner)(nil)
	_ kube.Preflighter  = (*Submariner)(nil)
)

// SubmarinerInfo registers Submariner.
func SubmarinerInfo() datapath.Info {
	return datapath.Info{
		Name:    SubmarinerName,
		Summary: "Kubernetes: Submariner; a ServiceExport of the server, the client dials <svc>.<ns>.svc.clusterset.local",
		Options: []scenario.Field{
			{Name: "timeout", Kind: scenario.KindDuration, Default: DefaultExportTimeout, Doc: "how long to wait for the ServiceExport to be Ready"},
			namespaceOption("namespace", "submariner-operator", "Submariner"),
			selectorOption("gateway_selector", "app=submariner-gateway", "Submariner gateway"),
			selectorOption("route_agent_selector", "app=submariner-routeagent", "Submariner route agent"),
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			s := &Submariner{
				Timeout:            durationOpt(o, "timeout", DefaultExportTimeout),
				Namespace:          stringOpt(o, "namespace"),
				GatewaySelector:    stringOpt(o, "gateway_selector"),
				RouteAgentSelector: stringOpt(o, "route_agent_selector"),
			}
			return s, s.Validate()
		},
		Components: declared("gateway", "route-agent"),
		Kube:       true,
	}
}

// Validate reports options the adapter cannot use.
func (s *Submariner) Validate() error {
	if s.Timeout <= 0 {
		return fmt.Errorf("%s: timeout %s: want a positive duration", SubmarinerName, s.Timeout)
	}
	if err := checkName(SubmarinerName, "namespace", s.Namespace); err != nil {
		return err
	}
	if err := checkSelector(SubmarinerName, "gateway_selector", s.GatewaySelector); err != nil {
		return err
	}
	return checkSelector(SubmarinerName, "route_agent_selector", s.RouteAgentSelector)
}

// Shape lets the run's Role manage the Service and its ServiceExport.
func (s *Submariner) Shape(p *kube.PodShape) {
	p.Rules = append(p.Rules, servicesRule, rbacv1.PolicyRule{
		APIGroups: []string{serviceExportGVR.Group},
		Resources: []string{serviceExportGVR.Resource},
		Verbs:     []string{"get", "list", "watch", "create", "delete"},
	})
}

// Preflight checks that every cluster runs Submariner (submariner.io/v1
// gateways), that the server's serves ServiceExports and the clients'
// ServiceImports (multicluster.x-k8s.io/v1alpha1).
func (s *Submariner) Preflight(_ context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	cls, err := clusterSpecs(SubmarinerName, sites, cs)
	if err != nil {
		return err
	}
	const provides = "is Submariner (with Lighthouse service discovery) installed and joined to the broker?"
	for _, c := range cls {
		if _, err := requireAPI(SubmarinerName, c.clients, c.site.Name, api{group: "submariner.io", versions: []string{"v1"}, resources: []string{"gateways"}}, provides); err != nil {
			return err
		}
		mcs := api{group: serviceExportGVR.Group, versions: []string{"v1alpha1"}}
		if c.server {
			mcs.resources = append(mcs.resources, "serviceexports")
		}
		if c.client {
			mcs.resources = append(mcs.resources, "serviceimports")
		}
		if _, err := requireAPI(SubmarinerName, c.clients, c.site.Name, mcs, provides); err != nil {
			return err
		}
	}
	return nil
}

// objects are what Submariner's adapter creates for server: the Service,
// then its ServiceExport.
func (s *Submariner) objects(server Site) []object {
	return []object{
		serviceObject(server, serviceSpec(server, server, corev1.ServiceTypeClusterIP, nil, nil)),
		newObject(server, serviceExportGVR, "ServiceExport", ServiceName, nil, nil),
	}
}

// Setup exports the server and waits until the export is Ready.
func (s *Submariner) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, SubmarinerName, s, tb)
}

func (s *Submariner) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	var made created
	objs := s.objects(server)
	for _, o := range objs {
		if _, err := made.create(ctx, SubmarinerName, o); err != nil {
			made.closeAfter(SubmarinerName)
			return nil, err
		}
	}
	export := objs[1]
	err := waitFor(ctx, export.describe()+" to be Ready", s.Timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		u, err := get(ctx, export)
		if err != nil {
			return false, err.Error(), nil
		}
		c := conditions(u)
		if v, ok := c["Valid"]; ok && v[0] == "False" {
			return false, "", fmt.Errorf("%s is not valid: %s", export.describe(), v[1])
		}
		return c["Ready"][0] == "True", formatConditions(c), nil
	})
	if err != nil {
		made.closeAfter(SubmarinerName)
		return nil, fmt.Errorf("%s: %w", SubmarinerName, err)
	}
	sets := []podSet{
		{kind: "submariner-gateway", role: "gateway", namespace: s.Namespace, selector: s.GatewaySelector, option: "gateway_selector"},
		{kind: "submariner-routeagent", role: "route-agent", namespace: s.Namespace, selector: s.RouteAgentSelector, agentNodes: true, option: "route_agent_selector"},
	}
	comps, err := listComponents(ctx, SubmarinerName, sites, sets)
	if err != nil {
		made.closeAfter(SubmarinerName)
		return nil, err
	}
	return withRefresh(&datapath.Link{
		Target:     targetsTo(server, testbed.Target{Host: ServiceName + "." + server.Namespace() + ".svc.clusterset.local", Port: ServicePort}),
		Components: comps,
		Alive:      alive(SubmarinerName, sites, comps),
		Close:      func(ctx context.Context) error { return made.close(ctx, SubmarinerName) },
	}, SubmarinerName, sites, nil, sets), nil
}
