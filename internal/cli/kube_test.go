package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// ctx that this process owns, and are not being deleted (other tests'
// are not this test's business).
func runNamespaces(t *testing.T, ctx string) []string {
	t.Helper()
	return namespacesOf(t, ctx, func(ns corev1.Namespace) bool {
		return ns.DeletionTimestamp == nil && ns.Annotations[kube.AnnotationOwnerPID] == strconv.Itoa(os.Getpid())
	})
}

// namespacesOf lists the namespaces labelled with a run ID in context ctx
// that keep accepts.
func namespacesOf(t *testing.T, ctx string, keep func(corev1.Namespace) bool) []string {
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
		if keep(ns) {
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
	recs, _ := runKubeScenario(t, `name: kube-baselines
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
`)
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
}

// ownedNamespaces lists the run namespaces in context ctx owned by
// process pid (kube.AnnotationOwnerPID), deleting ones included.
func ownedNamespaces(t *testing.T, ctx string, pid int) []string {
	t.Helper()
	return namespacesOf(t, ctx, func(ns corev1.Namespace) bool { return ns.Annotations[kube.AnnotationOwnerPID] == strconv.Itoa(pid) })
}

// startKubeRun starts `spanperf run` as a child on the two clusters with
// a long rr, and waits until its namespaces exist in both.
func startKubeRun(t *testing.T, ctxs []string, image, dir string) *exec.Cmd {
	t.Helper()
	f := filepath.Join(t.TempDir(), "k.yaml")
	src := fmt.Sprintf("name: kube-stop\nsites:\n  - {name: east, context: %s}\n  - {name: west, context: %s}\ndatapaths: [k8s-pod]\nworkloads: [{type: rr}]\nrepetitions: 3\nduration: 20s\nwarmup: 0s\n", ctxs[0], ctxs[1])
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-f", f, "--out", dir, "--image", image)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &e, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if len(ownedNamespaces(t, ctxs[0], cmd.Process.Pid)) > 0 && len(ownedNamespaces(t, ctxs[1], cmd.Process.Pid)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run made no namespaces in 60s:\n%s", e.String())
		}
	}
	// The agent pods are up once a trial runs: let one start.
	time.Sleep(8 * time.Second)
	return cmd
}

// TestKubeInterruptRemovesNamespaces: ^C (SIGINT) during a run on the two
// clusters stops it with exit 130 and deletes its namespaces in both.
func TestKubeInterruptRemovesNamespaces(t *testing.T) {
	ctxs, image := kubeEnv(t)
	cmd := startKubeRun(t, ctxs, image, filepath.Join(t.TempDir(), "run"))
	pid := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("exit %d (%v), want 130", code, err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not stop within 3 minutes of SIGINT")
	}
	for _, c := range ctxs[:2] {
		if ns := ownedNamespaces(t, c, pid); len(ns) > 0 {
			t.Errorf("context %s: left after ^C: %v", c, ns)
		}
	}
}

// TestKubeKillThenCleanKube: a run killed with SIGKILL leaves its
// namespaces; `spanperf clean --kube` removes them (and only them: a
// namespace of a live run is left, with the reason).
func TestKubeKillThenCleanKube(t *testing.T) {
	ctxs, image := kubeEnv(t)
	cmd := startKubeRun(t, ctxs, image, filepath.Join(t.TempDir(), "run"))
	pid := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	left := ownedNamespaces(t, ctxs[0], pid)
	if len(left) == 0 {
		t.Fatal("nothing left after SIGKILL: nothing for clean to do")
	}
	out, errOut, code := spanperf(t, "clean", "--kube", "--context", strings.Join(ctxs[:2], ","))
	if code != 0 {
		t.Fatalf("clean --kube: exit %d\n%s%s", code, out, errOut)
	}
	for _, ns := range left {
		if !strings.Contains(out, "removed context "+ctxs[0]+": namespace "+ns) {
			t.Errorf("clean --kube did not say it removed %s:\n%s", ns, out)
		}
	}
	for _, c := range ctxs[:2] {
		if ns := ownedNamespaces(t, c, pid); len(ns) > 0 {
			t.Errorf("context %s: left after kill -9 and clean --kube: %v", c, ns)
		}
	}
	// What the killed run left on this machine (its ledger and temp dir)
	// goes with the local clean.
	ledgers := func() []string {
		files, _ := ledgersOf(pid)
		return files
	}
	if len(ledgers()) == 0 {
		t.Error("the killed run left no ledger: its temp dir cannot be swept")
	}
	if out, errOut, code := spanperf(t, "clean"); code != 0 {
		t.Errorf("clean: exit %d\n%s%s", code, out, errOut)
	}
	if l := ledgers(); len(l) > 0 {
		t.Errorf("left after clean: %v", l)
	}
}

// TestKubeBadInput: an unknown context and an image that cannot be pulled
// fail the run's trials with errors that name them, within the timeouts,
// and leave no namespace.
func TestKubeBadInput(t *testing.T) {
	ctxs, image := kubeEnv(t)
	for _, c := range []struct {
		name, ctx0, image string
		want              []string
	}{
		{"unknown-context", "nowhere", image, []string{`"nowhere"`, "context"}},
		{"bad-image", ctxs[0], "127.0.0.1:1/spanperf/none:none", []string{"ErrImagePull", "agent"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "k.yaml")
			src := fmt.Sprintf("name: bad\nsites:\n  - {name: east, context: %s}\n  - {name: west, context: %s}\ndatapaths: [k8s-pod]\nworkloads: [{type: rr}]\nrepetitions: 1\nduration: 1s\n", c.ctx0, ctxs[1])
			if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "run")
			start := time.Now()
			out, errOut, code := spanperf(t, "run", "-f", f, "--out", dir, "--image", c.image)
			took := time.Since(start)
			recs, _ := results.Load(dir)
			if len(recs) != 1 || recs[0].Error == "" {
				t.Fatalf("exit %d, records %+v\n%s%s", code, recs, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(recs[0].Error, w) {
					t.Errorf("error %q lacks %q", recs[0].Error, w)
				}
			}
			if took > 3*time.Minute {
				t.Errorf("took %s", took)
			}
			t.Logf("%s: %s in %s", c.name, recs[0].Error, took.Round(time.Millisecond))
			for _, k := range ctxs[:2] {
				if ns := runNamespaces(t, k); len(ns) > 0 {
					t.Errorf("context %s: namespaces left: %v", k, ns)
				}
			}
		})
	}
}

// TestUpRefusesKube: up builds local testbeds only, and says so for an
// exposure adapter or Kubernetes sites, building nothing.
func TestUpRefusesKube(t *testing.T) {
	for _, src := range []string{
		"name: u\ndatapaths: [native]\nworkloads: [{type: rr}]\n",
		"name: u\nsites: [{name: a, context: x}, {name: b, context: y}]\ndatapaths: [k8s-pod]\nworkloads: [{type: rr}]\n",
	} {
		f := filepath.Join(t.TempDir(), "u.yaml")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := spanperf(t, "up", "-f", f, "--datapath", "k8s-pod")
		if code != 1 || !strings.Contains(errOut, "k8s-pod") || !strings.Contains(errOut, "Kubernetes sites") {
			t.Errorf("up --datapath k8s-pod: exit %d: %s", code, errOut)
		}
	}
}

// kubeServerImage is the test server image (test/kube/server-image.sh:
// nginx and PostgreSQL from this host's Debian packages) named by
// SPANPERF_KUBE_SERVER_IMAGE; the test skips without it.
func kubeServerImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("SPANPERF_KUBE_SERVER_IMAGE")
	if img == "" {
		t.Skip("needs the test server image in the local clusters: test/kube/server-image.sh --import, then SPANPERF_KUBE_SERVER_IMAGE=spanperf.local/server:test")
	}
	return img
}

// TestKubeNginxServerImage runs http with server: nginx across the two
// clusters through k8s-pod, nginx running in the server pod's server
// container from the server image, at a constant 1000 requests/s with
// bodies of 350 and 4096 bytes. Known answer: every request answered
// (the client counts a body of another size as an error), none failed,
// at most 1% late, and the achieved rate within 1% of the rate offered; nginx's
// CPU seconds from its container's cgroup; no namespace is left.
func TestKubeNginxServerImage(t *testing.T) {
	ctxs, image := kubeEnv(t)
	server := kubeServerImage(t)
	f := filepath.Join(t.TempDir(), "k.yaml")
	src := fmt.Sprintf(`name: kube-nginx
sites:
  - {name: east, context: %s}
  - {name: west, context: %s}
server_image: %s
datapaths: [k8s-pod]
workloads:
  - {type: http, server: nginx, rate: 1000, connections: 4, body_size: [350, 4096]}
repetitions: 1
duration: 3s
warmup: 500ms
`, ctxs[0], ctxs[1], server)
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
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.TrialKey(), r.Error)
			continue
		}
		offered := r.Metrics[results.TargetRate]
		got := r.Metrics[results.RequestsPerS]
		if offered < 990 || offered > 1010 || got < 0.99*offered || got > 1.01*offered {
			t.Errorf("%s: %s = %.1f, %s = %.1f: want the offered 1000/s, achieved within 1%%", r.TrialKey(), results.RequestsPerS, got, results.TargetRate, offered)
		}
		for _, k := range []string{"errors", "timeouts"} {
			if v := r.Metrics[k]; v != 0 {
				t.Errorf("%s: %s = %v, want 0", r.TrialKey(), k, v)
			}
		}
		// This machine's two cores are shared by both clusters and other
		// tests: a stall of a few tens of ms can leave requests unsent at
		// the window's end. Within 1% is the known answer's margin.
		if late, n := r.Metrics[results.Late], r.Metrics["requests"]; late > 0.01*n {
			t.Errorf("%s: %v late of %v requests, want at most 1%%", r.TrialKey(), late, n)
		}
		// nginx's CPU is its container's cgroup's (TestServerContainer
		// checks that reading against a known burn): one worker, so at
		// most one core over the 3 s window.
		if v, ok := r.Metrics[results.CPUSecondsServer]; !ok || !(v > 0) || v > 3.3 {
			t.Errorf("%s: %s = %v (present %v), want in (0, 3.3] s", r.TrialKey(), results.CPUSecondsServer, v, ok)
		}
		t.Logf("%s: %.1f requests/s (offered %.1f), p50 %v s, nginx %.3f CPU s", r.TrialKey(), got, offered, r.Metrics["latency_p50_s"], r.Metrics[results.CPUSecondsServer])
	}
	for _, c := range ctxs[:2] {
		if ns := runNamespaces(t, c); len(ns) > 0 {
			t.Errorf("context %s: namespaces left: %v", c, ns)
		}
	}
}

// TestKubeServerImageLacks: a server image without nginx, or without
// PostgreSQL's user (the agent image has neither), fails the trial with
// an error naming what is missing, the image, the pod and its container,
// and leaves no namespace.
func TestKubeServerImageLacks(t *testing.T) {
	ctxs, image := kubeEnv(t)
	for _, c := range []struct {
		name, workload string
		want           []string
	}{
		{"nginx", "{type: http, server: nginx, rate: 100}", []string{"nginx: not found in image " + image, "pod spanperf-", "/agent-west, container server"}},
		{"postgres-user", "{type: pgbench}", []string{"image " + image, "/agent-west, container server", "user postgres: not in /etc/passwd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "k.yaml")
			src := fmt.Sprintf("name: bad\nsites:\n  - {name: east, context: %s}\n  - {name: west, context: %s}\nserver_image: %s\ndatapaths: [k8s-pod]\nworkloads: [%s]\nrepetitions: 1\nduration: 1s\n", ctxs[0], ctxs[1], image, c.workload)
			if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "run")
			start := time.Now()
			out, errOut, code := spanperf(t, "run", "-f", f, "--out", dir, "--image", image)
			took := time.Since(start)
			recs, _ := results.Load(dir)
			if len(recs) != 1 || recs[0].Error == "" {
				t.Fatalf("exit %d, records %+v\n%s%s", code, recs, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(recs[0].Error, w) {
					t.Errorf("error %q lacks %q", recs[0].Error, w)
				}
			}
			t.Logf("%s in %s", recs[0].Error, took.Round(time.Millisecond))
			for _, k := range ctxs[:2] {
				if ns := runNamespaces(t, k); len(ns) > 0 {
					t.Errorf("context %s: namespaces left: %v", k, ns)
				}
			}
		})
	}
}

// TestServerImageRefusals: server: nginx or pgbench on Kubernetes sites
// without server_image, and server_image on local sites, are refused at parse
// time with file:line: key and what to do.
func TestServerImageRefusals(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"name: u\nsites: [{name: a, context: x}, {name: b, context: y}]\ndatapaths: [k8s-pod]\nworkloads:\n  - {type: http, server: nginx}\n",
			"u.yaml:5: workloads[0].server: nginx on Kubernetes sites runs from the image server_image: names"},
		{"name: u\nserver_image: spanperf.local/server:test\ndatapaths: [native]\nworkloads: [{type: rr}]\n",
			"u.yaml:2: server_image: applies only to Kubernetes sites"},
		{"name: u\nsites: [{name: a, context: x}, {name: b, context: y}]\ndatapaths: [k8s-pod]\nworkloads:\n  - {type: pgbench}\n",
			"u.yaml:5: workloads[0].type: pgbench on Kubernetes sites runs PostgreSQL and pgbench from the image server_image: names"},
	} {
		f := filepath.Join(t.TempDir(), "u.yaml")
		if err := os.WriteFile(f, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := spanperf(t, "run", "-f", f, "--out", filepath.Join(t.TempDir(), "run"))
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("exit %d: %s\nwant %q", code, errOut, c.want)
		}
	}
}

// TestKubePgbenchServerImage runs pgbench across the two clusters through
// k8s-pod: PostgreSQL in the server pod's server container and pgbench in
// the client pod's, both from the server image. Known answers: flat out,
// 4 sessions each with one transaction in flight, so by Little's law
// transactions/s × mean latency is just under 4 (pgbench's own time
// between transactions is the rest); paced at 300/s, the transactions
// completed match the rate pgbench offered (its Poisson schedule) within
// 2%. No namespace is left.
func TestKubePgbenchServerImage(t *testing.T) {
	ctxs, image := kubeEnv(t)
	server := kubeServerImage(t)
	f := filepath.Join(t.TempDir(), "k.yaml")
	src := fmt.Sprintf(`name: kube-pgbench
sites:
  - {name: east, context: %s}
  - {name: west, context: %s}
server_image: %s
datapaths: [k8s-pod]
workloads:
  - {type: pgbench, clients: 4, jobs: 2, rate: [0, 300]}
repetitions: 1
duration: 3s
warmup: 500ms
`, ctxs[0], ctxs[1], server)
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
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.TrialKey(), r.Error)
			continue
		}
		tps, mean := r.Metrics[results.TransactionsPerS], r.Metrics["latency_mean_s"]
		if !(tps > 0) || !(mean > 0) || !(r.Metrics["latency_p50_s"] > 0) || r.Metrics["errors"] != 0 {
			t.Errorf("%s: metrics %v", r.TrialKey(), r.Metrics)
			continue
		}
		if rate, _ := r.Params["rate"].(float64); rate > 0 {
			if offered := r.Metrics[results.OfferedPerS]; tps < 0.98*offered || tps > 1.02*offered {
				t.Errorf("%s: %.1f transactions/s, offered %.1f: want within 2%%", r.TrialKey(), tps, offered)
			}
		} else if inFlight := tps * mean; inFlight < 3.4 || inFlight > 4.05 {
			t.Errorf("%s: %.0f transactions/s × mean latency %.3g s = %.2f in flight, want just under the 4 sessions", r.TrialKey(), tps, mean, inFlight)
		}
		// PostgreSQL's CPU, from its container's cgroup: some, and no
		// more than this machine's 2 cores over the 3 s window.
		if v, ok := r.Metrics[results.CPUSecondsServer]; !ok || !(v > 0) || v > 6.3 {
			t.Errorf("%s: %s = %v (present %v), want in (0, 6.3] s", r.TrialKey(), results.CPUSecondsServer, v, ok)
		}
		t.Logf("%s: %.0f transactions/s, p50 %.3g s, mean %.3g s, PostgreSQL %.3f CPU s", r.TrialKey(), tps, r.Metrics["latency_p50_s"], mean, r.Metrics[results.CPUSecondsServer])
	}
	for _, c := range ctxs[:2] {
		if ns := runNamespaces(t, c); len(ns) > 0 {
			t.Errorf("context %s: namespaces left: %v", c, ns)
		}
	}
}
