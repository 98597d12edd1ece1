// Package kube is the Kubernetes testbed: each site is a kubeconfig
// context, with the run's namespace (spanperf-<run>, labelled with the run
// ID) and one agent pod; processes run by exec in that pod. The exposure
// adapters (datapath/kubedp) make the server reachable across sites.
package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Labels and annotations on what the run creates in a cluster.
const (
	// LabelRun is on the run's namespaces and everything in them: the run ID.
	LabelRun = "spanperf.io/run"
	// LabelSite is on an agent pod: its scenario site.
	LabelSite = "spanperf.io/site"
	// LabelComponent is "agent" on agent pods, "node-probe" on the node probe's.
	LabelComponent = "spanperf.io/component"

	// AnnotationOwnerHost, AnnotationOwnerPID and AnnotationOwnerStart are
	// on a run's namespaces: the host name, PID and start time (clock
	// ticks, testbed.ProcStart) of the controller that made them, so that
	// Clean can tell a dead run from a live one.
	AnnotationOwnerHost  = "spanperf.io/owner-host"
	AnnotationOwnerPID   = "spanperf.io/owner-pid"
	AnnotationOwnerStart = "spanperf.io/owner-start"
)

// ComponentAgent is the LabelComponent of agent pods.
const ComponentAgent = "agent"

// SiteSpec is one scenario site on a cluster.
type SiteSpec struct {
	// Name is the scenario's site name.
	Name string
	// Context is the kubeconfig context; "" is the current one.
	Context string
	// Kubeconfig is the kubeconfig file; "" uses the default loading
	// rules ($KUBECONFIG, ~/.kube/config).
	Kubeconfig string
	// NodeSelector places the site's agent pod.
	NodeSelector map[string]string
	// Tolerations let the agent pod run on tainted nodes.
	Tolerations []corev1.Toleration
}

// Clients are the API clients of one cluster (one kubeconfig context).
type Clients struct {
	// Context is the context's name as resolved (never "").
	Context string
	// Config is the REST config; its Timeout bounds ordinary requests.
	Config *rest.Config
	// Kube is the typed clientset; Kube.Discovery() finds API groups.
	Kube kubernetes.Interface
	// Dynamic reaches third-party resources (CRDs) without their Go types.
	Dynamic dynamic.Interface
}

// PodShape is what an exposure adapter asks of the run's namespaces and
// agent pods before they are created.
type PodShape struct {
	// HostNetwork runs the agent pods on their node's network (k8s-hostnet).
	HostNetwork bool
	// NamespaceLabels are added to every site's namespace (e.g. Istio's
	// injection or ambient labels).
	NamespaceLabels map[string]string
	// PodLabels and PodAnnotations are added to every agent pod.
	PodLabels, PodAnnotations map[string]string
	// Rules are added to the run's namespace-scoped Role: the export
	// objects of the solution (Skupper Listeners, ServiceExports, ...).
	Rules []rbacv1.PolicyRule
}

// Shaper is implemented by exposure adapters that need something of the
// namespaces or pods (see PodShape).
type Shaper interface {
	Shape(*PodShape)
}

// Preflighter is implemented by exposure adapters: before anything is
// created, Preflight checks that the clusters of the sites (in scenario
// order) have what the adapter needs (a CRD, a controller, a namespace
// label) and returns an error naming what is missing, and where.
type Preflighter interface {
	Preflight(ctx context.Context, sites []SiteSpec, clusters []*Clients) error
}

// Spec is what a run asks of its clusters.
type Spec struct {
	// Run is the run ID: the namespaces are spanperf-<Run>.
	Run string
	// Sites are the scenario's sites; two may share a context.
	Sites []SiteSpec
	// Image is the agent image (spanperf at /spanperf).
	Image string
	// ServerImage, when not empty, is the image of each agent pod's second
	// container, ServerContainer, where commands with Server set run
	// (nginx, PostgreSQL); any image does, with or without a shell: an
	// init container copies the agent into it (ServerAgentPath).
	ServerImage string
	// PullPolicy of the agent image and the server image; default IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Shape is what the datapath asks of namespaces and pods.
	Shape PodShape
	// ShareNode lets two sites in one cluster place their pods on one
	// node; by default anti-affinity keeps them apart.
	ShareNode bool
	// ReadyTimeout bounds the wait for the agent pods; default 2m.
	ReadyTimeout time.Duration
	// ConnectTimeout bounds each API server's first answer; default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// Namespace is the run's namespace in every cluster.
func Namespace(run string) string { return "spanperf-" + run }
