package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/kube/kpatch"
)

// relayFixture is a user's "solution" on the server's cluster: a
// Deployment of `spanperf agent relay` on the node network, forwarding
// Port on the node to the agent server's port on the same node, in a
// namespace of the test's own.
type relayFixture struct {
	c         kubernetes.Interface
	ns        string
	port      int
	nodeIP    string
	original  corev1.ResourceRequirements
	selector  string
	container string
}

const relayName = "klimits-relay"

// newRelay creates the relay in context ctx and waits until it runs; the
// namespace is deleted when the test ends.
func newRelay(t *testing.T, ctx, image string) *relayFixture {
	t.Helper()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: ctx}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 15 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bg, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The node's own address, as the agent server on the node network
	// listens there.
	nodes, err := c.CoreV1().Nodes().List(bg, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes of context %s: %v (%d)", ctx, err, len(nodes.Items))
	}
	f := &relayFixture{c: c, port: 20000 + rand.IntN(9000), selector: "app=" + relayName, container: "relay"}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			f.nodeIP = a.Address
		}
	}
	if f.nodeIP == "" {
		t.Fatalf("node %s of context %s has no InternalIP", nodes.Items[0].Name, ctx)
	}
	f.ns = fmt.Sprintf("klimits-%06x", rand.IntN(1<<24))
	if _, err := c.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.CoreV1().Namespaces().Delete(bg, f.ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", f.ns, err)
			return
		}
		err := wait.PollUntilContextTimeout(bg, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().Namespaces().Get(ctx, f.ns, metav1.GetOptions{})
			return err != nil, nil
		})
		if err != nil {
			t.Errorf("namespace %s still there after 90s", f.ns)
		}
	})
	f.original = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}}
	one := int32(1)
	grace := int64(5)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: relayName, Namespace: f.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": relayName}},
			// The new pod listens on the node's port: the old one must go first.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": relayName}},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: f.container, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:   []string{"/spanperf", "agent", "relay", "--listen", fmt.Sprintf(":%d", f.port), "--to", fmt.Sprintf("%s:%d", f.nodeIP, agent.DefaultPort)},
						Resources: f.original,
					}},
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(f.ns).Create(bg, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(bg, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.AppsV1().Deployments(f.ns).Get(ctx, relayName, metav1.GetOptions{})
		return err == nil && got.Status.AvailableReplicas == 1, nil
	})
	if err != nil {
		t.Fatalf("relay deployment %s/%s in context %s not available in 2m", f.ns, relayName, ctx)
	}
	return f
}

// scenario is a scenario through the relay with the relay's CPU limits
// swept.
func (f *relayFixture) scenario(t *testing.T, ctxs []string, workloads, duration string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "limits.yaml")
	src := fmt.Sprintf(`name: kube-limits
sites:
  - {name: east, context: %s}
  - {name: west, context: %s}
probe: node
allow_patch: true
datapaths:
  - name: k8s-custom
    target: "{server_node_ip}:%d"
    host_network: true
    components:
      - {name: relay, site: west, namespace: %s, selector: %q, container: %s}
workloads: %s
limits:
  relay: {cpu: [0.1, 0.3]}
repetitions: 1
duration: %s
warmup: 1s
`, ctxs[0], ctxs[1], f.port, f.ns, f.selector, f.container, workloads, duration)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRestored: the Deployment's container resources are the original
// ones and the patch's annotations are gone.
func (f *relayFixture) checkRestored(t *testing.T) {
	t.Helper()
	bg, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := f.c.AppsV1().Deployments(f.ns).Get(bg, relayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Resources; !apiequality.Semantic.DeepEqual(got, f.original) {
		t.Errorf("relay resources after the run: %+v, want the original %+v", got, f.original)
	}
	for _, a := range []string{kpatch.AnnotationRun, kpatch.AnnotationOriginal} {
		if v, ok := d.Annotations[a]; ok {
			t.Errorf("annotation %s left: %q", a, v)
		}
	}
}

// TestKubeLimitsRelay sizes a relay on the path by its CPU limit, through
// k8s-custom, on the two local clusters: the relay's CPU as the node probe
// measures it sits at its limit when saturated, stream throughput rises
// with the limit, and afterwards the Deployment is as it was.
func TestKubeLimitsRelay(t *testing.T) {
	ctxs, image := kubeEnv(t)
	f := newRelay(t, ctxs[1], image)
	sc := f.scenario(t, ctxs, "[{type: stream, message_size: 65536}, {type: rr, request_size: 64, response_size: 64}]", "4s")
	dir := filepath.Join(t.TempDir(), "run")
	out, errOut, code := spanperf(t, "run", "-f", sc, "--out", dir, "--image", image, "--seed", "1")
	if code != 0 {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	rate := map[string]float64{}
	var order []float64
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.TrialKey(), r.Error)
			continue
		}
		lim := r.Metrics[results.For(results.CPULimitCores, "relay")]
		order = append(order, lim)
		cpu, ok := r.Metrics[results.For(results.CPUCores, "relay")]
		key := fmt.Sprintf("%s@%g", r.Workload, lim)
		t.Logf("%s: relay cpu %.3f cores (limit %g), stream %.0f Mbit/s, rr %.0f/s, path %.3f cores",
			key, cpu, lim, r.Metrics[results.ThroughputBPS]/1e6, r.Metrics[results.TransactionsPerS], r.Metrics[results.CPUCoresPath])
		if lim != 0.1 && lim != 0.3 {
			t.Errorf("%s: %s = %v, want 0.1 or 0.3", r.TrialKey(), results.For(results.CPULimitCores, "relay"), lim)
		}
		if !ok {
			t.Errorf("%s: relay cpu missing: %q", key, r.Missing[results.For(results.CPUCores, "relay")])
		}
		switch r.Workload {
		case "stream":
			rate[key] = r.Metrics[results.ThroughputBPS]
			// A saturated relay uses its whole limit and no more.
			if ok && (cpu < 0.8*lim || cpu > 1.1*lim) {
				t.Errorf("%s: relay cpu %.3f cores, want 0.8–1.1 × its limit %g", key, cpu, lim)
			}
		case "rr":
			rate[key] = r.Metrics[results.TransactionsPerS]
			if ok && cpu > 1.1*lim {
				t.Errorf("%s: relay cpu %.3f cores, above 1.1 × its limit %g", key, cpu, lim)
			}
		}
	}
	// Each limit is one rollout: the group's trials are ordered by limit.
	if len(order) == 4 && (order[0] != order[1] || order[2] != order[3]) {
		t.Errorf("limits in trial order %v: want the trials of each limit together", order)
	}
	if a, b := rate["stream@0.1"], rate["stream@0.3"]; !(b > 1.5*a) {
		t.Errorf("stream at 0.3 cores %.0f bit/s, at 0.1 %.0f: want it to rise with the limit (> 1.5×)", b, a)
	}
	if a, b := rate["rr@0.1"], rate["rr@0.3"]; !(b > a) {
		t.Errorf("rr at 0.3 cores %.0f/s, at 0.1 %.0f/s: want it to rise with the limit", b, a)
	}
	f.checkRestored(t)
	for _, c := range ctxs[:2] {
		if ns := runNamespaces(t, c); len(ns) > 0 {
			t.Errorf("context %s: namespaces left: %v", c, ns)
		}
	}
}

// TestKubeLimitsKillThenCleanKube: a run killed with SIGKILL while the
// relay's Deployment is patched leaves it patched; `spanperf clean --kube`
// restores its original resources and removes the annotations.
func TestKubeLimitsKillThenCleanKube(t *testing.T) {
	ctxs, image := kubeEnv(t)
	f := newRelay(t, ctxs[1], image)
	sc := f.scenario(t, ctxs, "[{type: rr}]", "30s")
	cmd := exec.Command(bin, "run", "-f", sc, "--out", filepath.Join(t.TempDir(), "run"), "--image", image)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &e, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	bg, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := wait.PollUntilContextTimeout(bg, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := f.c.AppsV1().Deployments(f.ns).Get(ctx, relayName, metav1.GetOptions{})
		return err == nil && d.Annotations[kpatch.AnnotationRun] != "", nil
	})
	if err != nil {
		t.Fatalf("the run did not patch the relay in 2m:\n%s", e.String())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	d, err := f.c.AppsV1().Deployments(f.ns).Get(bg, relayName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations[kpatch.AnnotationRun] == "" {
		t.Fatal("the relay is not patched after SIGKILL: nothing for clean to restore")
	}
	out, errOut, code := spanperf(t, "clean", "--kube", "--context", strings.Join(ctxs[:2], ","))
	if code != 0 {
		t.Fatalf("clean --kube: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("clean --kube:\n%s", out)
	if !strings.Contains(out, relayName) {
		t.Errorf("clean --kube did not say it restored %s:\n%s", relayName, out)
	}
	f.checkRestored(t)
	if out, errOut, code := spanperf(t, "clean"); code != 0 {
		t.Errorf("clean: exit %d\n%s%s", code, out, errOut)
	}
}

// TestKubeLimitsInterruptRestores: ^C (SIGINT) while the relay's
// Deployment is patched stops the run with exit 130, and the run itself
// restores the Deployment on its way out.
func TestKubeLimitsInterruptRestores(t *testing.T) {
	ctxs, image := kubeEnv(t)
	f := newRelay(t, ctxs[1], image)
	sc := f.scenario(t, ctxs, "[{type: rr}]", "30s")
	cmd := exec.Command(bin, "run", "-f", sc, "--out", filepath.Join(t.TempDir(), "run"), "--image", image)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &e, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	bg, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := wait.PollUntilContextTimeout(bg, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := f.c.AppsV1().Deployments(f.ns).Get(ctx, relayName, metav1.GetOptions{})
		return err == nil && d.Annotations[kpatch.AnnotationRun] != "", nil
	})
	if err != nil {
		t.Fatalf("the run did not patch the relay in 2m:\n%s", e.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("exit %d (%v), want 130\n%s", code, err, e.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the run did not stop within 3 minutes of SIGINT:\n%s", e.String())
	}
	f.checkRestored(t)
}
