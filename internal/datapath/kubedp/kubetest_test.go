package kubedp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// clustersOf returns the clients of the test clusters named by
// SPANPERF_KUBECONFIG (colon-separated kubeconfigs) and
// SPANPERF_KUBE_CONTEXTS (comma-separated contexts), or skips.
func clustersOf(t *testing.T) []*kube.Clients {
	t.Helper()
	cfg, ctxs := os.Getenv("SPANPERF_KUBECONFIG"), os.Getenv("SPANPERF_KUBE_CONTEXTS")
	if cfg == "" || ctxs == "" {
		t.Skip("SPANPERF_KUBECONFIG and SPANPERF_KUBE_CONTEXTS unset: no test clusters (make test brings them up)")
	}
	var out []*kube.Clients
	for _, name := range strings.Split(ctxs, ",") {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: strings.Split(cfg, ":")}
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		rc.Timeout = 20 * time.Second
		k, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		d, err := dynamic.NewForConfig(rc)
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		out = append(out, &kube.Clients{Context: name, Config: rc, Kube: k, Dynamic: d})
	}
	return out
}

// pauseImage is the image of the test pods: blocks until signalled.
func pauseImage() string {
	if img := os.Getenv("SPANPERF_KUBE_PAUSE_IMAGE"); img != "" {
		return img
	}
	return "spanperf.local/pause:1"
}

// realSite is a Site made of real objects: a namespace of its own
// (spanperf-adtest-<id>) and a pod in it.
type realSite struct {
	name    string
	clients *kube.Clients
	ns      string
	pod     *corev1.Pod
}

func (s *realSite) Name() string { return s.name }
func (s *realSite) Spec() kube.SiteSpec {
	return kube.SiteSpec{Name: s.name, Context: s.clients.Context}
}
func (s *realSite) Clients() *kube.Clients      { return s.clients }
func (s *realSite) Namespace() string           { return s.ns }
func (s *realSite) Pod() *corev1.Pod            { return s.pod }
func (s *realSite) Selector() map[string]string { return siteSelector(s.ns, s.name) }

func siteSelector(ns, site string) map[string]string {
	return map[string]string{kube.LabelRun: strings.TrimPrefix(ns, "spanperf-"), kube.LabelSite: site}
}

// podOpts shapes a test pod.
type podOpts struct {
	hostNetwork bool
	// agent runs the spanperf agent server (SPANPERF_KUBE_IMAGE) in place
	// of pause.
	agent bool
}

// testNamespace makes a namespace spanperf-adtest-<random> in c, deleted
// (and waited for, bounded) when the test ends.
func testNamespace(t *testing.T, c *kube.Clients) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := "spanperf-adtest-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{kube.LabelRun: strings.TrimPrefix(ns, "spanperf-")},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s in %s: %v", ns, c.Context, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		zero := int64(0)
		err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s in %s: %v", ns, c.Context, err)
			return
		}
		err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s in %s not gone after 90s", ns, c.Context)
		}
	})
	return ns
}

// newRealSite makes a namespace and a Ready pod in c as site name.
func newRealSite(t *testing.T, c *kube.Clients, name string, o podOpts) *realSite {
	t.Helper()
	ns := testNamespace(t, c)
	zero := int64(0)
	ctr := corev1.Container{Name: "agent", Image: pauseImage(), ImagePullPolicy: corev1.PullIfNotPresent}
	if o.agent {
		img := os.Getenv("SPANPERF_KUBE_IMAGE")
		if img == "" {
			img = "spanperf.local/spanperf:dev"
		}
		ctr = corev1.Container{
			Name: "agent", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
			Command:        []string{"/spanperf", "agent", "serve", "--listen", fmt.Sprintf(":%d", ServicePort)},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intOrStr(ServicePort)}}, PeriodSeconds: 1},
		}
	}
	labels := siteSelector(ns, name)
	labels[kube.LabelComponent] = "agent"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-" + name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{ctr}, HostNetwork: o.hostNetwork,
			TerminationGracePeriodSeconds: &zero,
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s in %s: %v", ns, pod.Name, c.Context, err)
	}
	var got *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = p
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s in %s not Ready after 60s: phase %s %+v", ns, pod.Name, c.Context, got.Status.Phase, got.Status.ContainerStatuses)
	}
	return &realSite{name: name, clients: c, ns: ns, pod: got}
}

// sameNamespace is a second site in s's namespace and cluster (a second
// pod), as two sites sharing one context are.
func sameNamespace(t *testing.T, s *realSite, name string) *realSite {
	t.Helper()
	o := *s
	o.name = name
	return &o
}

func intOrStr(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }
