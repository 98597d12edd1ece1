package kpatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// The tests run against the first cluster of $SPANPERF_KUBE_CONTEXTS
// (kubeconfigs in $SPANPERF_KUBECONFIG), in namespaces of their own
// (spanperf-patchtest-*), which they delete.

// pauseImage is the sandbox image test/kube/lib.sh imports into both
// clusters (PAUSE_IMAGE), unless $SPANPERF_KUBE_PAUSE_IMAGE names another.
var pauseImage = func() string {
	if s := os.Getenv("SPANPERF_KUBE_PAUSE_IMAGE"); s != "" {
		return s
	}
	return "spanperf.local/pause:1"
}()

// cluster returns the clients of the first test cluster and its kubeconfig,
// or skips the test when the environment names none.
func cluster(t *testing.T) (*kube.Clients, string) {
	t.Helper()
	kc, ctxs := os.Getenv("SPANPERF_KUBECONFIG"), os.Getenv("SPANPERF_KUBE_CONTEXTS")
	if kc == "" || ctxs == "" {
		t.Skip("SPANPERF_KUBECONFIG and SPANPERF_KUBE_CONTEXTS are unset: no cluster to patch (make test sets them)")
	}
	c, err := connect(kc, strings.Split(ctxs, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	return c, kc
}

// connect is a ConnectFunc (kube.Connect's body is another helper's).
func connect(kubeconfig, context string) (*kube.Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.Precedence = filepath.SplitList(kubeconfig)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", context, err)
	}
	cfg.Timeout = 30 * time.Second
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kube.Clients{Context: context, Config: cfg, Kube: k, Dynamic: d}, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// namespace makes a spanperf-patchtest-* namespace, deleted (and waited
// for, at most 2 minutes) when the test ends.
func namespace(t *testing.T, c *kube.Clients) string {
	t.Helper()
	ctx := context.Background()
	ns := "spanperf-patchtest-" + randHex(4)
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
			return
		}
		err := poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("namespace %s not gone: %v", ns, err)
		}
	})
	return ns
}

func podSpec(containers ...corev1.Container) corev1.PodTemplateSpec {
	grace := int64(1)
	for i := range containers {
		containers[i].Image = pauseImage
		containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "patchtest"}},
		Spec:       corev1.PodSpec{Containers: containers, TerminationGracePeriodSeconds: &grace},
	}
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

// limited has a CPU request and limit (and memory), like a sized component.
var limited = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("100m"), corev1.ResourceMemory: mustQ("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQ("1"), corev1.ResourceMemory: mustQ("32Mi")},
}

func createDeployment(t *testing.T, c *kube.Clients, ns, name string, mod func(*appsv1.Deployment)) {
	t.Helper()
	one := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "patchtest"}},
			Template: podSpec(corev1.Container{Name: "main", Resources: limited}, corev1.Container{Name: "side"}),
		},
	}
	if mod != nil {
		mod(d)
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createDaemonSet(t *testing.T, c *kube.Clients, ns, name string) {
	t.Helper()
	d := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "patchtest-ds"}},
			Template: podSpec(corev1.Container{Name: "main"}),
		},
	}
	d.Spec.Template.Labels = map[string]string{"app": "patchtest-ds"}
	if _, err := c.Kube.AppsV1().DaemonSets(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createStatefulSet(t *testing.T, c *kube.Clients, ns, name string) {
	t.Helper()
	one := int32(1)
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &one,
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "patchtest-sts"}},
			Template:    podSpec(corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("300m")}}}),
		},
	}
	s.Spec.Template.Labels = map[string]string{"app": "patchtest-sts"}
	if _, err := c.Kube.AppsV1().StatefulSets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for the object's rollout, as Patch does.
func waitReady(t *testing.T, c *kube.Clients, ref Ref) {
	t.Helper()
	w, err := workloadFor(c, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.waitRollout(context.Background(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// snapshot is the container's resources in the object's template, as JSON,
// and the object's annotations.
func snapshot(t *testing.T, c *kube.Clients, ref Ref) (string, map[string]string) {
	t.Helper()
	w, _ := workloadFor(c, ref)
	o, err := w.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctr, _, err := o.container(ref)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ctr.Resources)
	return string(b), o.meta.Annotations
}

// livePods returns the object's pods that are not being deleted.
func livePods(t *testing.T, c *kube.Clients, ref Ref) []corev1.Pod {
	t.Helper()
	w, _ := workloadFor(c, ref)
	o, err := w.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := metav1.LabelSelectorAsSelector(o.selector)
	pods, err := c.Kube.CoreV1().Pods(ref.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// cfsQuota returns a container's CFS quota in cores (-1: none) from its
// cgroup on this machine (cgroup v1 cpu or v2 cpu.max, cgroupfs driver),
// or ok false when the pod's cgroup is not here.
func cfsQuota(t *testing.T, pod corev1.Pod, container string) (cores float64, dir string, ok bool) {
	t.Helper()
	cid := ""
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			_, cid, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	if cid == "" {
		t.Fatalf("pod %s: container %s has no ID", pod.Name, container)
	}
	leaf := filepath.Join("pod"+string(pod.UID), cid)
	for _, pat := range []string{
		"/sys/fs/cgroup/cpu/*/kubepods/" + leaf, "/sys/fs/cgroup/cpu/*/kubepods/*/" + leaf,
		"/sys/fs/cgroup/cpu/kubepods/" + leaf, "/sys/fs/cgroup/cpu/kubepods/*/" + leaf,
	} {
		m, _ := filepath.Glob(pat)
		if len(m) == 1 {
			q := readInt(t, filepath.Join(m[0], "cpu.cfs_quota_us"))
			p := readInt(t, filepath.Join(m[0], "cpu.cfs_period_us"))
			if q < 0 {
				return -1, m[0], true
			}
			return float64(q) / float64(p), m[0], true
		}
	}
	for _, pat := range []string{"/sys/fs/cgroup/*/kubepods/" + leaf, "/sys/fs/cgroup/*/kubepods/*/" + leaf} {
		m, _ := filepath.Glob(pat)
		if len(m) == 1 {
			b, err := os.ReadFile(filepath.Join(m[0], "cpu.max"))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if f[0] == "max" {
				return -1, m[0], true
			}
			q, _ := strconv.ParseFloat(f[0], 64)
			p, _ := strconv.ParseFloat(f[1], 64)
			return q / p, m[0], true
		}
	}
	return 0, "", false
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// newLedger makes a run's ledger in a LedgerDir of the test's own.
func newLedger(t *testing.T) *testbed.Ledger {
	t.Helper()
	dir := t.TempDir()
	old := testbed.LedgerDir
	testbed.LedgerDir = dir
	t.Cleanup(func() { testbed.LedgerDir = old })
	l, err := testbed.NewLedger("pt"+randHex(3), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Remove() })
	return l
}
