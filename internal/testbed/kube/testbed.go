package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Names of what New makes in each namespace.
const (
	// ServiceAccount is the run's ServiceAccount (the agent pods run as it,
	// without a token: the agent does not call the API).
	ServiceAccount = "spanperf"
	// Role is the run's namespace-scoped Role, bound to ServiceAccount.
	Role = "spanperf"
	// AgentContainer is the agent pods' one container.
	AgentContainer = "agent"
	// AgentPath is the spanperf binary in the agent image.
	AgentPath = "/spanperf"
	// ServerContainer is the agent pods' second container, from
	// Spec.ServerImage, when there is one.
	ServerContainer = "server"
	// ServerAgentPath is the copy of the agent in the server container,
	// in an emptyDir the init container CopyContainer fills.
	ServerAgentPath = serverAgentDir + "/spanperf"
	// CopyContainer is the init container that copies the agent for the
	// server container.
	CopyContainer  = "copy-agent"
	serverAgentDir = "/.spanperf"
)

// Defaults.
const (
	// DefaultReadyTimeout bounds the wait for the agent pods.
	DefaultReadyTimeout = 2 * time.Minute
	// TeardownTimeout bounds deleting the namespaces and waiting until
	// they are gone.
	TeardownTimeout = 2 * time.Minute
	// pollInterval paces every wait for the API server.
	pollInterval = 500 * time.Millisecond
	// terminationGrace is the agent pods' grace period: the agent's sleep
	// ends at once on SIGTERM.
	terminationGrace = 2
)

// Normalize fills in defaults.
func (s *Spec) Normalize() {
	if s.PullPolicy == "" {
		s.PullPolicy = corev1.PullIfNotPresent
	}
	if s.ReadyTimeout <= 0 {
		s.ReadyTimeout = DefaultReadyTimeout
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
}

// Validate checks the spec: the run ID and site names make valid object
// names, the sites are distinct, there is an image.
func (s *Spec) Validate() error {
	if errs := validation.IsDNS1123Label(Namespace(s.Run)); s.Run == "" || len(errs) > 0 {
		return fmt.Errorf("run %q: namespace %s: not a DNS label (%s)", s.Run, Namespace(s.Run), strings.Join(errs, "; "))
	}
	if len(s.Sites) == 0 {
		return errors.New("no sites")
	}
	if s.Image == "" {
		return errors.New("no agent image")
	}
	seen := map[string]bool{}
	for _, site := range s.Sites {
		if errs := validation.IsDNS1123Label(podName(site.Name)); site.Name == "" || len(errs) > 0 {
			return fmt.Errorf("site %q: pod %s: not a DNS label (%s)", site.Name, podName(site.Name), strings.Join(errs, "; "))
		}
		if seen[site.Name] {
			return fmt.Errorf("site %q: named twice", site.Name)
		}
		seen[site.Name] = true
	}
	switch s.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("pull policy %q: want Always, IfNotPresent or Never", s.PullPolicy)
	}
	return nil
}

// podName is the agent pod of site.
func podName(site string) string { return "agent-" + site }

// cluster is one API server the run uses, and what the run made there.
type cluster struct {
	clients *Clients
	// created: the run's namespace here is the run's own (Close deletes it).
	created bool
}

// Testbed is a run's sites on clusters.
type Testbed struct {
	spec     Spec
	sites    []*Site
	clusters []*cluster
	tmp      string
	ledger   *testbed.Ledger
	seq      atomic.Int64

	mu       sync.Mutex
	procs    []*podProcess
	closed   bool
	closeErr error
}

var _ testbed.Testbed = (*Testbed)(nil)

// New creates the run's namespaces, RBAC and agent pods and waits until
// the pods are Ready; on error (or when ctx ends) it removes what it
// created before returning. Sites that reach one API server share its
// namespace; their pods keep to distinct nodes unless spec.ShareNode.
func New(ctx context.Context, spec Spec) (_ *Testbed, err error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("kube testbed: %w", err)
	}
	ledger, err := testbed.NewLedger(spec.Run, false)
	if err != nil {
		return nil, fmt.Errorf("kube testbed %s: %w", spec.Run, err)
	}
	tb := &Testbed{spec: spec, ledger: ledger}
	defer func() {
		if err != nil {
			// ctx may be over: tear down on a context of our own, bounded.
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TeardownTimeout)
			defer cancel()
			tb.mu.Lock()
			tb.closed = true
			tb.mu.Unlock()
			if terr := tb.teardown(tctx); terr != nil {
				err = fmt.Errorf("%w (and tearing down: %v)", err, terr)
			}
		}
	}()
	if tb.tmp, err = ledger.MkdirTemp("kube"); err != nil {
		return nil, fmt.Errorf("kube testbed %s: %w", spec.Run, err)
	}
	if err := tb.connect(ctx); err != nil {
		return nil, err
	}
	owner, err := ownerAnnotations()
	if err != nil {
		return nil, err
	}
	for _, cl := range tb.clusters {
		if err := tb.prepare(ctx, cl, owner); err != nil {
			return nil, err
		}
	}
	for _, s := range tb.sites {
		if err := tb.createPod(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := tb.waitReady(ctx); err != nil {
		return nil, err
	}
	return tb, nil
}

// connect makes one Clients per API server and the sites.
func (tb *Testbed) connect(ctx context.Context) error {
	bySpec := map[[2]string]*cluster{}
	byHost := map[string]*cluster{}
	for _, ss := range tb.spec.Sites {
		k := [2]string{ss.Kubeconfig, ss.Context}
		cl := bySpec[k]
		if cl == nil {
			c, err := Connect(ctx, ss, tb.spec.ConnectTimeout)
			if err != nil {
				return fmt.Errorf("site %s: %w", ss.Name, err)
			}
			// Two contexts that reach one API server are one cluster: one namespace.
			if cl = byHost[c.Config.Host]; cl == nil {
				cl = &cluster{clients: c}
				byHost[c.Config.Host] = cl
				tb.clusters = append(tb.clusters, cl)
			}
			bySpec[k] = cl
		}
		tb.sites = append(tb.sites, &Site{tb: tb, spec: ss, cl: cl, pod: &corev1.Pod{}})
	}
	return nil
}

// ownerAnnotations name this controller, for Clean.
func ownerAnnotations() (map[string]string, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	pid := os.Getpid()
	start, err := testbed.ProcStart(pid)
	if err != nil {
		return nil, fmt.Errorf("owner: %w", err)
	}
	return map[string]string{
		AnnotationOwnerHost:  host,
		AnnotationOwnerPID:   strconv.Itoa(pid),
		AnnotationOwnerStart: strconv.FormatUint(start, 10),
	}, nil
}

// agentRules are what the run's Role allows in its namespace.
var agentRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "services", "endpoints"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get", "list", "watch"}},
}

// prepare makes the run's namespace, ServiceAccount, Role and RoleBinding
// in cl.
func (tb *Testbed) prepare(ctx context.Context, cl *cluster, owner map[string]string) error {
	c, ns, run := cl.clients, Namespace(tb.spec.Run), tb.spec.Run
	labels := maps.Clone(tb.spec.Shape.NamespaceLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRun] = run
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels, Annotations: owner},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("context %s: namespace %s already exists (run ID in use?)", c.Context, ns)
	}
	if err != nil {
		return c.apiError("create", "namespaces", "", err)
	}
	cl.created = true
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelRun: run}}
	}
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(ServiceAccount)}, metav1.CreateOptions{}); err != nil {
		return c.apiError("create", "serviceaccounts", ns, err)
	}
	rules := append(append([]rbacv1.PolicyRule(nil), agentRules...), tb.spec.Shape.Rules...)
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta(Role), Rules: rules}, metav1.CreateOptions{}); err != nil {
		return c.apiError("create", "roles.rbac.authorization.k8s.io", ns, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: meta(Role),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: ns}},
	}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return c.apiError("create", "rolebindings.rbac.authorization.k8s.io", ns, err)
	}
	return nil
}

// PodFor is the agent pod New creates for site: exported so that its
// shape can be read (and tested) without a cluster.
func PodFor(spec Spec, site SiteSpec) *corev1.Pod {
	spec.Normalize()
	run := spec.Run
	labels := maps.Clone(spec.Shape.PodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRun] = run
	labels[LabelSite] = site.Name
	labels[LabelComponent] = ComponentAgent
	grace := int64(terminationGrace)
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(site.Name), Namespace: Namespace(run),
			Labels: labels, Annotations: maps.Clone(spec.Shape.PodAnnotations),
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:            ServiceAccount,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			NodeSelector:                  maps.Clone(site.NodeSelector),
			Tolerations:                   append([]corev1.Toleration(nil), site.Tolerations...),
			Containers: []corev1.Container{{
				Name:            AgentContainer,
				Image:           spec.Image,
				ImagePullPolicy: spec.PullPolicy,
				Command:         []string{AgentPath, "agent", "sleep"},
				VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if spec.ServerImage != "" {
		// The server container shares /tmp with the agent's and runs the
		// agent's sleep and `agent run`, copied in, so that any image does.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "agent-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		bin := corev1.VolumeMount{Name: "agent-bin", MountPath: serverAgentDir}
		pod.Spec.InitContainers = []corev1.Container{{
			Name:            CopyContainer,
			Image:           spec.Image,
			ImagePullPolicy: spec.PullPolicy,
			Command:         []string{AgentPath, "agent", "write", "--mode", "0755", "--from", AgentPath, ServerAgentPath},
			VolumeMounts:    []corev1.VolumeMount{bin},
		}}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:            ServerContainer,
			Image:           spec.ServerImage,
			ImagePullPolicy: spec.PullPolicy,
			Command:         []string{ServerAgentPath, "agent", "sleep"},
			VolumeMounts:    []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, bin},
		})
	}
	if spec.Shape.HostNetwork {
		pod.Spec.HostNetwork = true
		pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	if !spec.ShareNode {
		pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: run, LabelComponent: ComponentAgent}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	return pod
}

// createPod creates s's agent pod.
func (tb *Testbed) createPod(ctx context.Context, s *Site) error {
	c := s.cl.clients
	pod := PodFor(tb.spec, s.spec)
	if _, err := c.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("site %s: %w", s.Name(), c.apiError("create", "pods", pod.Namespace, err))
	}
	return nil
}

// waitReady waits until every agent pod is Ready, or one never will be.
func (tb *Testbed) waitReady(ctx context.Context) error {
	pending := map[*Site]bool{}
	for _, s := range tb.sites {
		pending[s] = true
	}
	var stuck *Site // a pod not yet Ready, for the timeout's error
	var stuckState string
	err := poll(ctx, pollInterval, tb.spec.ReadyTimeout, "agent pods Ready", func(ctx context.Context) (bool, error) {
		stuck = nil
		// Look at every pending pod, each time: any one may never get there.
		for _, s := range tb.sites {
			if !pending[s] {
				continue
			}
			c, ns := s.cl.clients, Namespace(tb.spec.Run)
			pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, podName(s.Name()), metav1.GetOptions{})
			if err != nil {
				if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
					return false, permanent{fmt.Errorf("site %s: %w", s.Name(), c.apiError("get", "pods", ns, err))}
				}
				return false, fmt.Errorf("site %s: %w", s.Name(), c.apiError("get", "pods", ns, err))
			}
			if podReady(pod) {
				s.pod = pod
				delete(pending, s)
				continue
			}
			state, fatal := podState(pod)
			if fatal {
				return false, permanent{tb.podError(ctx, s, pod, state, "")}
			}
			if stuck == nil {
				stuck, stuckState = s, state
			}
		}
		return len(pending) == 0, nil
	})
	var p permanent
	if err == nil || errors.As(err, &p) || stuck == nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", tb.podError(ctx, stuck, nil, stuckState, "not Ready"), ctx.Err())
	}
	return tb.podError(ctx, stuck, nil, stuckState, fmt.Sprintf("not Ready within %v", tb.spec.ReadyTimeout))
}

// podError describes why s's pod is not Ready: "context spk1: pod
// spanperf-x/agent-b: phase Pending: Unschedulable: ...; last event:
// FailedScheduling: ...", with the last lines of an exited agent's log.
func (tb *Testbed) podError(ctx context.Context, s *Site, pod *corev1.Pod, state, prefix string) error {
	c, ns, name := s.cl.clients, Namespace(tb.spec.Run), podName(s.Name())
	// ctx may be over (a timeout): look on a short context of our own.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := fmt.Sprintf("context %s: site %s: pod %s/%s", c.Context, s.Name(), ns, name)
	if prefix != "" {
		msg += " " + prefix
	}
	msg += ": " + state
	if strings.Contains(state, "exited with status") || strings.Contains(state, "killed by signal") {
		if b, err := c.Kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: AgentContainer, TailLines: ptr(int64(5)), Previous: pod != nil && pod.Status.ContainerStatuses != nil && pod.Status.ContainerStatuses[0].RestartCount > 0}).DoRaw(lctx); err == nil && len(b) > 0 {
			msg += "; log: " + strings.Join(strings.Fields(strings.TrimSpace(string(b))), " ")
		}
	}
	if ev := lastEvent(lctx, c, ns, name, 2*time.Second); ev != "" {
		msg += "; last event: " + ev
	}
	return errors.New(msg)
}

func ptr[T any](v T) *T { return &v }

// teardown stops the processes, deletes the namespaces the run created,
// waits until they are gone, and removes the temp dir and the ledger.
func (tb *Testbed) teardown(ctx context.Context) error {
	tb.mu.Lock()
	procs := tb.procs
	tb.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(2 * time.Second) }()
	}
	wg.Wait()
	errs := make([]error, len(tb.clusters))
	for i, cl := range tb.clusters {
		if !cl.created {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = deleteNamespace(ctx, cl.clients, Namespace(tb.spec.Run))
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		if tb.tmp != "" {
			if rerr := os.RemoveAll(tb.tmp); rerr != nil {
				err = rerr
			}
		}
		if err == nil {
			err = tb.ledger.Remove()
		}
	}
	return err
}

// deleteNamespace deletes ns and waits until it is gone.
func deleteNamespace(ctx context.Context, c *Clients, ns string) error {
	bg := metav1.DeletePropagationBackground
	err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.apiError("delete", "namespaces", "", err)
	}
	return poll(ctx, pollInterval, TeardownTimeout, fmt.Sprintf("context %s: namespace %s gone", c.Context, ns), func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("phase %s", n.Status.Phase)
	})
}

// Sites implements testbed.Testbed.
func (tb *Testbed) Sites() []testbed.Site {
	out := make([]testbed.Site, len(tb.sites))
	for i, s := range tb.sites {
		out[i] = s
	}
	return out
}

// KubeSites are the sites in scenario order.
func (tb *Testbed) KubeSites() []*Site { return tb.sites }

// Spec is the spec the testbed was made from, normalized.
func (tb *Testbed) Spec() Spec { return tb.spec }

// TempDir implements testbed.Testbed: a local directory (mode 0700).
func (tb *Testbed) TempDir() string { return tb.tmp }

// Ledger implements testbed.Testbed: the run's local ledger.
func (tb *Testbed) Ledger() *testbed.Ledger { return tb.ledger }

// Close stops the processes still running, deletes the run's namespaces,
// waits until they are gone (each within TeardownTimeout), and removes
// the temp dir and the ledger. Later calls return the first's result.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	if tb.closed {
		err := tb.closeErr
		tb.mu.Unlock()
		return err
	}
	tb.closed = true
	tb.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), TeardownTimeout+30*time.Second)
	defer cancel()
	err := tb.teardown(ctx)
	if err != nil {
		err = fmt.Errorf("kube testbed %s: close: %w", tb.spec.Run, err)
	}
	tb.mu.Lock()
	tb.closeErr = err
	tb.mu.Unlock()
	return err
}

// Site is one scenario site: a namespace and an agent pod in a cluster.
type Site struct {
	tb   *Testbed
	spec SiteSpec
	cl   *cluster
	pod  *corev1.Pod
}

var _ testbed.PodSite = (*Site)(nil)

// Name implements testbed.Site.
func (s *Site) Name() string { return s.spec.Name }

// Spec is the site's spec.
func (s *Site) Spec() SiteSpec { return s.spec }

// Clients are the site's cluster's clients.
func (s *Site) Clients() *Clients { return s.cl.clients }

// Namespace is the run's namespace in the site's cluster.
func (s *Site) Namespace() string { return Namespace(s.tb.spec.Run) }

// Pod is the site's agent pod as it was when Ready (IP, host IP, node,
// UID). Do not modify it.
func (s *Site) Pod() *corev1.Pod { return s.pod }

// ServerImage implements testbed.PodSite: the run's server image, or "".
func (s *Site) ServerImage() string { return s.tb.spec.ServerImage }

// Where implements testbed.PodSite: "context C: pod NS/NAME, container
// agent" (or server).
func (s *Site) Where(server bool) string {
	return fmt.Sprintf("context %s: pod %s/%s, container %s", s.cl.clients.Context, s.Namespace(), podName(s.Name()), container(server))
}

// container is the agent pod's container that runs a command with the
// given Server setting.
func container(server bool) string {
	if server {
		return ServerContainer
	}
	return AgentContainer
}

// Selector is the label set that selects exactly this site's agent pod
// (for a Service).
func (s *Site) Selector() map[string]string {
	return map[string]string{LabelRun: s.tb.spec.Run, LabelSite: s.spec.Name, LabelComponent: ComponentAgent}
}
