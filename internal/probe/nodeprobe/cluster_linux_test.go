package nodeprobe_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// cluster is one real cluster of the test environment.
type cluster struct {
	context string
	config  *rest.Config
	kube    kubernetes.Interface
	image   string
	// clients are kube.Connect's, whose Exec the node probe runs through.
	clients *kube.Clients
}

// clusters returns the clusters the environment names
// (SPANPERF_KUBECONFIG, SPANPERF_KUBE_CONTEXTS, SPANPERF_KUBE_IMAGE), or
// skips the test when they are unset.
func clusters(t *testing.T) []cluster {
	t.Helper()
	cfgs, ctxs, image := os.Getenv("SPANPERF_KUBECONFIG"), os.Getenv("SPANPERF_KUBE_CONTEXTS"), os.Getenv("SPANPERF_KUBE_IMAGE")
	if cfgs == "" || ctxs == "" || image == "" {
		t.Skip("needs real clusters: SPANPERF_KUBECONFIG, SPANPERF_KUBE_CONTEXTS and SPANPERF_KUBE_IMAGE unset")
	}
	var out []cluster
	for _, name := range strings.Split(ctxs, ",") {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(cfgs)}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		cfg.Timeout = 20 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl, err := kube.Connect(ctx, kube.SiteSpec{Kubeconfig: cfgs, Context: name}, 20*time.Second)
		cancel()
		if err != nil {
			t.Fatalf("context %s: %v", name, err)
		}
		out = append(out, cluster{context: name, config: cfg, kube: cs, image: image, clients: cl})
	}
	return out
}

// testNamespace creates a namespace of the test's own (a run's name and
// label, so that `spanperf clean --kube` finds it after a crash) and
// deletes it, waiting until it is gone, in t.Cleanup.
func testNamespace(t *testing.T, c cluster) string {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	run := "np" + hex.EncodeToString(b)
	ns := kube.Namespace(run)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{kube.LabelRun: run}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("context %s: create namespace %s: %v", c.context, ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("context %s: delete namespace %s: %v", c.context, ns, err)
			return
		}
		last := waitFor(ctx, func() error {
			_, err := c.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
		if last != nil {
			t.Errorf("context %s: namespace %s not gone: %v", c.context, ns, last)
		}
	})
	return ns
}

// waitFor calls f every 200 ms until it returns nil or ctx ends; then it
// returns the last error.
func waitFor(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timeout, last error: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runningPod creates pod in ns and waits up to a minute until all its
// containers run, returning it as it then is.
func runningPod(t *testing.T, c cluster, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("context %s: create pod %s/%s: %v", c.context, ns, pod.Name, err)
	}
	var got *corev1.Pod
	if err := waitFor(ctx, func() error {
		p, err := c.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(pod.Spec.Containers) {
			return fmt.Errorf("pod %s/%s: phase %s", ns, pod.Name, p.Status.Phase)
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running == nil || s.ContainerID == "" {
				return fmt.Errorf("pod %s/%s: container %s not running (%+v)", ns, pod.Name, s.Name, s.State)
			}
		}
		got = p
		return nil
	}); err != nil {
		t.Fatalf("context %s: %v", c.context, err)
	}
	return got
}

// burnPod is a pod that burns cores (agent burn, for 2 minutes) in its
// first container, "burn", beside an idle one.
func burnPod(image string, cores float64) *corev1.Pod {
	never := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "burn", Labels: map[string]string{kube.LabelComponent: "burn"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &never,
			Containers: []corev1.Container{
				{Name: "burn", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/spanperf", "agent", "burn", "--cores", fmt.Sprint(cores), "--duration", "2m"}},
				{Name: "idle", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/spanperf", "agent", "sleep"}},
			},
		},
	}
}

// cgroupCPU is the CPU time charged to the cgroup of container id of
// pod uid on this machine, read from the cpuacct hierarchy (v1) or
// cpu.stat (v2): an account the node probe does not read.
func cgroupCPU(t *testing.T, uid, id string) time.Duration {
	t.Helper()
	for _, pat := range []string{
		"/sys/fs/cgroup/cpuacct/*/kubepods/*/pod" + uid + "/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpu,cpuacct/*/kubepods/*/pod" + uid + "/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/cpuacct/kubepods/*/pod" + uid + "/" + id + "/cpuacct.usage",
		"/sys/fs/cgroup/*/kubepods/*/pod" + uid + "/" + id + "/cpu.stat",
	} {
		m, _ := filepath.Glob(pat)
		if len(m) != 1 {
			continue
		}
		b, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(string(b))
		if strings.HasSuffix(m[0], "cpu.stat") {
			f := strings.Fields(s) // usage_usec N first
			us, _ := strconv.ParseInt(f[1], 10, 64)
			return time.Duration(us) * time.Microsecond
		}
		ns, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ns)
	}
	t.Fatalf("no cgroup of pod %s container %s on this machine", uid, id)
	return 0
}

// Known answer (b), on the real cluster: a pod of the test's own burns
// half a core in one container (`agent burn`) beside an idle one;
// `agent nodeprobe` on this machine (the cluster's node is this
// machine: the same /proc as the DaemonSet pod's with host PID) finds the
// pod by its UID and the container by the ID in its status, and measures
// the burn at what its cgroup's CPU account charged over the window
// ±10%, and at 0.5 cores ±20%; the whole pod is the burn and the idle
// container, within 0.05 cores of the burn alone; as one of the run's
// pods it is not foreign.
func TestClusterPodKnownCost(t *testing.T) {
	c := clusters(t)[0]
	ns := testNamespace(t, c)
	const cores = 0.5
	pod := runningPod(t, c, ns, burnPod(c.image, cores))
	uid := string(pod.UID)
	var burnID string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == "burn" {
			burnID = s.ContainerID
		}
	}
	spec := nodeprobe.Spec{
		Components: []nodeprobe.Component{
			{Name: "burn", PodUID: uid, Container: "burn", ContainerID: burnID},
			{Name: "pod", PodUID: uid},
		},
		RunPods:  []string{uid},
		Node:     pod.Spec.NodeName,
		Delay:    nodeprobe.Duration(300 * time.Millisecond),
		Window:   nodeprobe.Duration(4 * time.Second),
		Interval: nodeprobe.Duration(200 * time.Millisecond),
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("context %s node %s pod %s/%s uid %s burn %s", c.context, pod.Spec.NodeName, ns, pod.Name, uid, burnID)
	for attempt := 1; ; attempt++ {
		c0, t0 := cgroupCPU(t, uid, nodeprobe.ContainerID(burnID)), time.Now()
		r, code, stderr := runMain(t, nil, "--spec", string(b))
		acct := (cgroupCPU(t, uid, nodeprobe.ContainerID(burnID)) - c0).Seconds() / time.Since(t0).Seconds()
		if code != 0 {
			t.Fatalf("exit %d: %s (%+v)", code, stderr, r)
		}
		got, whole := r.Metrics[results.For(results.CPUCores, "burn")], r.Metrics[results.For(results.CPUCores, "pod")]
		var inForeign float64
		for _, f := range r.Foreign {
			if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", f.PID)); err == nil && strings.Contains(string(cg), "pod"+uid) {
				inForeign += f.Cores
			}
		}
		t.Logf("attempt %d: burn %.3f cores by its cgroup account, probe %.3f; pod %.3f; rss %.0f; the pod in foreign %.3f; node busy %.3f softirq %.3f foreign %.3f path %.3f; missing %v",
			attempt, acct, got, whole, r.Metrics[results.For(results.RSSBytesMax, "pod")], inForeign,
			r.Metrics[results.CPUCoresBusy], r.Metrics[results.CPUCoresSoftirq], r.Metrics[results.CPUCoresForeign], r.Metrics[results.CPUCoresPath], r.Missing)
		var fail []error
		if math.Abs(got-acct) > 0.1*acct {
			fail = append(fail, fmt.Errorf("burn measured %.3f cores, its cgroup %.3f: want ±10%%", got, acct))
		}
		if math.Abs(got-cores) > 0.2*cores {
			fail = append(fail, fmt.Errorf("burn measured %.3f cores, injected %.1f: want ±20%%", got, cores))
		}
		if whole < got || whole-got > 0.05 {
			fail = append(fail, fmt.Errorf("pod %.3f cores, want the burn's %.3f and at most 0.05 more (an idle container, a pause)", whole, got))
		}
		if inForeign > 0.05 {
			fail = append(fail, fmt.Errorf("%.3f cores of the pod's processes counted foreign: want the run's own", inForeign))
		}
		if _, ok := r.Metrics[results.CPUCoresSoftirq]; !ok {
			fail = append(fail, errors.New("no softirq"))
		}
		if len(fail) == 0 {
			return
		}
		if attempt == 2 {
			t.Fatal(errors.Join(fail...))
		}
		t.Logf("attempt %d: %v; once more", attempt, errors.Join(fail...))
	}
}
