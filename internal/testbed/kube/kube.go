// Package kube is the Kubernetes testbed: each site is a kubeconfig
// context, with the run's namespace (spanperf-<run>, labelled with the run
// ID) and one agent pod; processes run by exec in that pod. The exposure
// adapters (datapath/kubedp) make the server reachable across sites.
package kube

import (
	"context"
	"errors"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Labels and annotations on what the run creates in a cluster.
const (
	// LabelRun is on the run's namespaces and everything in them: the run ID.
	LabelRun = "spanperf.io/run"
	// LabelSite is on an agent pod: its scenario site.
	LabelSite = "spanperf.io/site"
	// LabelComponent is "agent" on agent pods, "node-probe" on the node probe's.
	LabelComponent = "spanperf.io/component"
)

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
	// PullPolicy of the agent image; default IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Shape is what the datapath asks of namespaces and pods.
	Shape PodShape
	// ShareNode lets two sites in one cluster place their pods on one
	// node; by default anti-affinity keeps them apart.
	ShareNode bool
	// ReadyTimeout bounds the wait for the agent pods; default 2m.
	ReadyTimeout time.Duration
}

// Namespace is the run's namespace in every cluster.
func Namespace(run string) string { return "spanperf-" + run }

// Exec runs argv in container of pod in namespace ns, streaming stdin (may
// be nil), stdout and stderr, and returns when the command exits
// (an error carrying its exit status when it is not 0) or ctx ends.
// Cancelling ctx ends the stream, not the remote process.
func (c *Clients) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errTODO
}

// Connect makes the clients of site's context, and checks that its API
// server answers within timeout.
func Connect(ctx context.Context, site SiteSpec, timeout time.Duration) (*Clients, error) {
	return nil, errTODO
}

// Testbed is a run's sites on clusters.
type Testbed struct{}

var _ testbed.Testbed = (*Testbed)(nil)

// New creates the run's namespaces, RBAC and agent pods and waits until
// the pods are Ready; on error it removes what it created.
func New(ctx context.Context, spec Spec) (*Testbed, error) { return nil, errTODO }

// Sites implements testbed.Testbed.
func (tb *Testbed) Sites() []testbed.Site { return nil }

// KubeSites are the sites in scenario order.
func (tb *Testbed) KubeSites() []*Site { return nil }

// TempDir implements testbed.Testbed.
func (tb *Testbed) TempDir() string { return "" }

// Ledger implements testbed.Testbed.
func (tb *Testbed) Ledger() *testbed.Ledger { return nil }

// Close deletes the run's namespaces and waits until they are gone.
func (tb *Testbed) Close() error { return errTODO }

// Site is one scenario site: a namespace and an agent pod in a cluster.
type Site struct{}

var _ testbed.Site = (*Site)(nil)

// Name implements testbed.Site.
func (s *Site) Name() string { return "" }

// Exec runs cmd (cmd.Agent must be set) in the site's agent pod.
func (s *Site) Exec(ctx context.Context, cmd testbed.Command) (testbed.Process, error) {
	return nil, errTODO
}

// Spec is the site's spec.
func (s *Site) Spec() SiteSpec { return SiteSpec{} }

// Clients are the site's cluster's clients.
func (s *Site) Clients() *Clients { return nil }

// Namespace is the run's namespace in the site's cluster.
func (s *Site) Namespace() string { return "" }

// Pod is the site's agent pod as it was when Ready (IP, host IP, node).
func (s *Site) Pod() *corev1.Pod { return nil }

// Selector is the label set that selects exactly this site's agent pod
// (for a Service).
func (s *Site) Selector() map[string]string { return nil }

var errTODO = errors.New("kube: not implemented yet")
