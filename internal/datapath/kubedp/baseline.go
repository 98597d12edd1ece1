package kubedp

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Names of the baseline adapters.
const (
	PodName          = "k8s-pod"
	HostNetName      = "k8s-hostnet"
	ClusterIPName    = "k8s-clusterip"
	NodePortName     = "k8s-nodeport"
	LoadBalancerName = "k8s-loadbalancer"
)

// servicesRule lets the run's Role manage Services, which the Service
// baselines and solutions create.
var servicesRule = rbacv1.PolicyRule{
	APIGroups: []string{""},
	Resources: []string{"services"},
	Verbs:     []string{"get", "list", "watch", "create", "delete"},
}

// Pod exposes the server as its agent pod's IP: the baseline of flat pod
// networks, where pods of one cluster reach the other's pods directly.
type Pod struct {
	// SwitchDelay delays failover's switch to the surviving server (see
	// Serve): a known answer.
	SwitchDelay time.Duration
}

// HostNet runs the agent pods on their nodes' network and exposes the
// server as its node's IP.
type HostNet struct{}

var (
	_ datapath.Datapath = Pod{}
	_ kube.Preflighter  = Pod{}
	_ datapath.Datapath = HostNet{}
	_ kube.Shaper       = HostNet{}
	_ kube.Preflighter  = HostNet{}
)

// PodInfo registers Pod.
func PodInfo() datapath.Info {
	return datapath.Info{
		Name:    PodName,
		Summary: "Kubernetes: the client dials the server's pod IP (flat pod networks routed between clusters; the baseline)",
		Options: []scenario.Field{switchDelayField},
		New: func(o map[string]any) (datapath.Datapath, error) {
			return Pod{SwitchDelay: durationOpt(o, "switch_delay", 0)}, nil
		},
		Components: kernelDeclared,
		Kube:       true,
	}
}

// HostNetInfo registers HostNet.
func HostNetInfo() datapath.Info {
	return datapath.Info{
		Name:       HostNetName,
		Summary:    "Kubernetes: agent pods on the host network; the client dials the server's node IP",
		New:        func(map[string]any) (datapath.Datapath, error) { return HostNet{}, nil },
		Components: kernelDeclared,
		Kube:       true,
	}
}

// Preflight needs nothing: pod IPs are known once the pods run.
func (Pod) Preflight(context.Context, []kube.SiteSpec, []*kube.Clients) error { return nil }

// Setup creates nothing: the target is the server pod's IP.
func (p Pod) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, PodName, p, tb)
}

func (p Pod) setup(_ context.Context, sites []Site) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	ip := server.Pod().Status.PodIP
	if ip == "" {
		return nil, fmt.Errorf("%s: pod %s/%s of site %s in context %s has no IP", PodName, server.Namespace(), server.Pod().Name, server.Name(), contextOf(server))
	}
	return &datapath.Link{
		Target:     podTargets(sites, func(s Site) string { return s.Pod().Status.PodIP }),
		Components: kernelOnly(),
		Serve:      serveOn(PodName, "", p.SwitchDelay, sites),
		Close:      func(context.Context) error { return nil },
	}, nil
}

// Shape asks for the agent pods on their nodes' network.
func (HostNet) Shape(s *kube.PodShape) { s.HostNetwork = true }

// Preflight needs nothing: every cluster can run host-network pods unless
// a policy forbids it, which the pod's creation then names.
func (HostNet) Preflight(context.Context, []kube.SiteSpec, []*kube.Clients) error { return nil }

// Setup creates nothing: the target is the server's node IP.
func (h HostNet) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, HostNetName, h, tb)
}

func (HostNet) setup(_ context.Context, sites []Site) (*datapath.Link, error) {
	server, _ := serverOf(sites)
	if !server.Pod().Spec.HostNetwork {
		return nil, fmt.Errorf("%s: pod %s/%s of site %s in context %s is not on the host network (the testbed did not apply Shape)", HostNetName, server.Namespace(), server.Pod().Name, server.Name(), contextOf(server))
	}
	if server.Pod().Status.HostIP == "" {
		return nil, fmt.Errorf("%s: pod %s/%s of site %s in context %s has no host IP", HostNetName, server.Namespace(), server.Pod().Name, server.Name(), contextOf(server))
	}
	return &datapath.Link{
		Target:     podTargets(sites, func(s Site) string { return s.Pod().Status.HostIP }),
		Components: kernelOnly(),
		Close:      func(context.Context) error { return nil },
	}, nil
}

// podTargets dials any site's pod at the address addr gives, on the port
// asked for.
func podTargets(sites []Site, addr func(Site) string) func(from, to testbed.Site, port int) testbed.Target {
	hosts := map[string]string{}
	for _, s := range sites {
		hosts[s.Name()] = addr(s)
	}
	return func(_, to testbed.Site, port int) testbed.Target {
		if to == nil {
			return testbed.Target{}
		}
		return testbed.Target{Host: hosts[to.Name()], Port: port}
	}
}

// Service exposes the server's agent pod through a Service of one type:
// ClusterIP (client and server in one cluster), NodePort (the server
// node's IP and the allocated nodePort) or LoadBalancer (the ingress
// address the cluster's load-balancer controller assigns, waited for
// within Timeout).
type Service struct {
	// Type is the Service's type.
	Type corev1.ServiceType
	// Timeout bounds the wait for a LoadBalancer's ingress address; 0 is 2m.
	Timeout time.Duration
	// SwitchDelay delays failover's switch to the surviving server
	// (NodePort; see Serve): a known answer.
	SwitchDelay time.Duration
}

var (
	_ datapath.Datapath = (*Service)(nil)
	_ kube.Shaper       = (*Service)(nil)
	_ kube.Preflighter  = (*Service)(nil)
)

// DefaultLoadBalancerTimeout bounds the wait for a LoadBalancer's ingress.
const DefaultLoadBalancerTimeout = 2 * time.Minute

// ClusterIPInfo registers Service of type ClusterIP.
func ClusterIPInfo() datapath.Info {
	return datapath.Info{
		Name:    ClusterIPName,
		Summary: "Kubernetes: a ClusterIP Service in front of the server; client and server in one cluster",
		New: func(map[string]any) (datapath.Datapath, error) {
			return &Service{Type: corev1.ServiceTypeClusterIP}, nil
		},
		Components: kernelDeclared,
		Kube:       true,
	}
}

// NodePortInfo registers Service of type NodePort.
func NodePortInfo() datapath.Info {
	return datapath.Info{
		Name:    NodePortName,
		Summary: "Kubernetes: a NodePort Service; the client dials the server node's IP and the nodePort",
		Options: []scenario.Field{switchDelayField},
		New: func(o map[string]any) (datapath.Datapath, error) {
			return &Service{Type: corev1.ServiceTypeNodePort, SwitchDelay: durationOpt(o, "switch_delay", 0)}, nil
		},
		Components: kernelDeclared,
		Kube:       true,
	}
}

// LoadBalancerInfo registers Service of type LoadBalancer.
func LoadBalancerInfo() datapath.Info {
	return datapath.Info{
		Name:    LoadBalancerName,
		Summary: "Kubernetes: a LoadBalancer Service; the client dials its ingress address (the \"no Skupper\" baseline)",
		Options: []scenario.Field{
			{Name: "timeout", Kind: scenario.KindDuration, Default: DefaultLoadBalancerTimeout, Doc: "how long to wait for the load balancer's ingress address"},
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			s := &Service{Type: corev1.ServiceTypeLoadBalancer, Timeout: durationOpt(o, "timeout", DefaultLoadBalancerTimeout)}
			return s, s.Validate()
		},
		Components: kernelDeclared,
		Kube:       true,
	}
}

// name is the adapter's registered name.
func (s *Service) name() string {
	switch s.Type {
	case corev1.ServiceTypeNodePort:
		return NodePortName
	case corev1.ServiceTypeLoadBalancer:
		return LoadBalancerName
	}
	return ClusterIPName
}

// Validate reports a type or timeout the adapter cannot use.
func (s *Service) Validate() error {
	switch s.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return fmt.Errorf("kube service: type %q (want ClusterIP, NodePort or LoadBalancer)", s.Type)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("%s: timeout %s is negative", s.name(), s.Timeout)
	}
	return nil
}

// Shape lets the run's Role create the Service.
func (s *Service) Shape(p *kube.PodShape) { p.Rules = append(p.Rules, servicesRule) }

// Preflight refuses ClusterIP across clusters: a ClusterIP is reachable
// only inside its own cluster.
func (s *Service) Preflight(_ context.Context, sites []kube.SiteSpec, clusters []*kube.Clients) error {
	if s.Type != corev1.ServiceTypeClusterIP || len(sites) < 2 {
		return nil
	}
	ctxOf := func(i int) string {
		if i < len(clusters) && clusters[i] != nil && clusters[i].Context != "" {
			return clusters[i].Context
		}
		return sites[i].Context
	}
	server := len(sites) - 1
	for i := range server {
		if ctxOf(i) != ctxOf(server) || sites[i].Kubeconfig != sites[server].Kubeconfig {
			return fmt.Errorf("%s: client site %s (context %s) and server site %s (context %s) are in different clusters; a ClusterIP is reachable only inside its cluster (use k8s-nodeport, k8s-loadbalancer or a multicluster solution)",
				ClusterIPName, sites[i].Name, ctxOf(i), sites[server].Name, ctxOf(server))
		}
	}
	return nil
}

// serviceObject is the Service s creates for the server site.
func (s *Service) serviceObject(server Site) object {
	return serviceObject(server, serviceSpec(server, server, s.Type, nil, nil))
}

// Setup creates the Service and waits for its address.
func (s *Service) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, s.name(), s, tb)
}

func (s *Service) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	name := s.name()
	server, clients := serverOf(sites)
	if s.Type == corev1.ServiceTypeClusterIP {
		for _, c := range clients {
			if !sameCluster(c, server) {
				return nil, fmt.Errorf("%s: client site %s (context %s) and server site %s (context %s) are in different clusters", name, c.Name(), contextOf(c), server.Name(), contextOf(server))
			}
		}
	}
	var made created
	o := s.serviceObject(server)
	got, err := made.create(ctx, name, o)
	if err != nil {
		return nil, err
	}
	target, err := s.target(ctx, o, got)
	if err != nil {
		made.closeAfter(name)
		return nil, err
	}
	link := &datapath.Link{
		Target:     targetsTo(server, target),
		Components: kernelOnly(),
		Close:      func(ctx context.Context) error { return made.close(ctx, name) },
	}
	if s.Type == corev1.ServiceTypeNodePort {
		link.Serve = serveOn(name, corev1.ServiceTypeNodePort, s.SwitchDelay, sites)
	}
	return link, nil
}

// target is what a client dials to reach the Service got (o as created).
func (s *Service) target(ctx context.Context, o object, got *unstructured.Unstructured) (testbed.Target, error) {
	name := s.name()
	switch s.Type {
	case corev1.ServiceTypeClusterIP:
		ip, _, _ := unstructured.NestedString(got.Object, "spec", "clusterIP")
		if ip == "" || ip == corev1.ClusterIPNone {
			return testbed.Target{}, fmt.Errorf("%s: %s has no cluster IP", name, o.describe())
		}
		return testbed.Target{Host: ip, Port: ServicePort}, nil
	case corev1.ServiceTypeNodePort:
		np := nodePort(got)
		if np == 0 {
			return testbed.Target{}, fmt.Errorf("%s: %s has no nodePort allocated", name, o.describe())
		}
		pod := o.site.Pod()
		if pod.Status.HostIP == "" {
			return testbed.Target{}, fmt.Errorf("%s: pod %s/%s in context %s has no host IP", name, pod.Namespace, pod.Name, contextOf(o.site))
		}
		return testbed.Target{Host: pod.Status.HostIP, Port: np}, nil
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultLoadBalancerTimeout
	}
	var host string
	err := waitFor(ctx, fmt.Sprintf("an ingress address of %s", o.describe()), timeout, time.Second, func(ctx context.Context) (bool, string, error) {
		u, err := get(ctx, o)
		if err != nil {
			return false, err.Error(), nil
		}
		host = ingressHost(u)
		return host != "", "status.loadBalancer.ingress is empty (is a load-balancer controller running?)", nil
	})
	if err != nil {
		return testbed.Target{}, fmt.Errorf("%s: %w", name, err)
	}
	return testbed.Target{Host: host, Port: ServicePort}, nil
}

// nodePort is the nodePort allocated to the Service's agent port.
func nodePort(u *unstructured.Unstructured) int {
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	for _, p := range ports {
		m, _ := p.(map[string]any)
		if port, _, _ := unstructured.NestedInt64(m, "port"); port != ServicePort {
			continue
		}
		np, _, _ := unstructured.NestedInt64(m, "nodePort")
		return int(np)
	}
	return 0
}

// ingressHost is the first ingress IP or hostname of a LoadBalancer
// Service.
func ingressHost(u *unstructured.Unstructured) string {
	ing, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
	for _, i := range ing {
		m, _ := i.(map[string]any)
		if ip, _ := m["ip"].(string); ip != "" {
			return ip
		}
		if h, _ := m["hostname"].(string); h != "" {
			return strings.TrimSuffix(h, ".")
		}
	}
	return ""
}
