package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// kubeEnv is the local test clusters as make test-kube describes them:
// SPANPERF_KUBECONFIG (a KUBECONFIG list), SPANPERF_KUBE_CONTEXTS (two
// contexts) and SPANPERF_KUBE_IMAGE (the agent image imported there). The
// test skips, saying so, without them.
func kubeEnv(t *testing.T) (contexts []string, image string) {
	t.Helper()
	kc, ctxs, img := os.Getenv("SPANPERF_KUBECONFIG"), os.Getenv("SPANPERF_KUBE_CONTEXTS"), os.Getenv("SPANPERF_KUBE_IMAGE")
	if kc == "" || ctxs == "" || img == "" {
		t.Skip("needs the local test clusters: run with make test-kube (SPANPERF_KUBECONFIG, SPANPERF_KUBE_CONTEXTS, SPANPERF_KUBE_IMAGE unset)")
	}
	contexts = strings.Split(ctxs, ",")
	if len(contexts) < 2 {
		t.Fatalf("SPANPERF_KUBE_CONTEXTS=%q: want two contexts", ctxs)
	}
	t.Setenv("KUBECONFIG", kc)
	return contexts, img
}

// runNamespaces lists the namespaces labelled with a run ID in context
// ctx that this process owns (other tests' are not this test's business).
func runNamespaces(t *testing.T, ctx string) []string {
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
	bg, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.CoreV1().Namespaces().List(bg, metav1.ListOptions{LabelSelector: kube.LabelRun})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range l.Items {
		if ns.DeletionTimestamp == nil && ns.Annotations[kube.AnnotationOwnerPID] == strconv.Itoa(os.Getpid()) {
			out = append(out, ns.Name)
		}
	}
	return out
}

// TestKubeRunBaselines runs stream, rr, crr and http across the two local
// clusters through k8s-pod (pod IP to pod IP across the clusters' routed
// pod networks), k8s-hostnet and k8s-nodeport, by the CLI as a user would,
// with the node probe: every trial succeeds with its figures, the node
// probe's CPU figures are there for each node and for the whole path, and
// no namespace is left.
func TestKubeRunBaselines(t *testing.T) {
	ctxs, image := kubeEnv(t)
	f := filepath.Join(t.TempDir(), "k.yaml")
	src := fmt.Sprintf(`name: kube-baselines
sites:
  - {name: east, context: %s}
  - {name: west, context: %s}
probe: node
baseline: k8s-pod
datapaths: [k8s-pod, k8s-hostnet, k8s-nodeport]
workloads:
  - {type: stream, message_size: 65536}
  - {type: rr, request_size: 64, response_size: 64}
  - {type: crr}
  - {type: http, rate: 500, connections: 4}
repetitions: 1
duration: 1s
warmup: 300ms
`, ctxs[0], ctxs[1])
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	out, errOut, code := spanperf(t, "run", "-f", f, "--out", dir, "--image", image, "--seed", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	recs, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 12 {
		t.Errorf("%d records, want 12", len(recs))
	}
	want := map[string]string{"stream": results.ThroughputBPS, "rr": results.TransactionsPerS, "crr": results.ConnectionsPerS, "http": results.RequestsPerS}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.TrialKey(), r.Error)
			continue
		}
		if v := r.Metrics[want[r.Workload]]; !(v > 0) {
			t.Errorf("%s: %s = %v", r.TrialKey(), want[r.Workload], v)
		}
		// Both clusters run on this machine: two nodes, one kernel.
		for _, k := range []string{results.CPUCoresBusy, results.CPUCoresPath,
			"cpu_cores_busy{node=spk-node1}", "cpu_cores_busy{node=spk-node2}"} {
			if v, ok := r.Metrics[k]; !ok || !(v > 0) || v > 2.05 {
				t.Errorf("%s: %s = %v (present %v, missing: %q), want in (0, 2] cores", r.TrialKey(), k, v, ok, r.Missing[k])
			}
		}
		// softirq is tick-sampled: a light load may show none.
		if v, ok := r.Metrics[results.CPUCoresSoftirq]; !ok || v < 0 || v > r.Metrics[results.CPUCoresBusy]+0.01 {
			t.Errorf("%s: %s = %v (present %v), want in [0, busy]", r.TrialKey(), results.CPUCoresSoftirq, v, ok)
		}
		if !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "share one kernel") }) {
			t.Errorf("%s: no warning that the nodes share a kernel: %q", r.TrialKey(), r.Warnings)
		}
	}
	for _, c := range ctxs[:2] {
		if ns := runNamespaces(t, c); len(ns) > 0 {
			t.Errorf("context %s: namespaces left: %v", c, ns)
		}
	}
}
