package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kubetest"
)

// childEnv makes the test binary a controller that makes a testbed for
// run $childEnv, says "ready", and waits to be killed (TestCleanAfterKill).
const childEnv = "SPANPERF_KUBETB_CHILD"

func TestMain(m *testing.M) {
	if run := os.Getenv(childEnv); run != "" {
		os.Exit(child(run))
	}
	os.Exit(m.Run())
}

func child(run string) int {
	env := kubetest.Env{Kubeconfig: os.Getenv("SPANPERF_KUBECONFIG"), Image: os.Getenv("SPANPERF_KUBE_IMAGE"),
		Contexts: strings.Split(os.Getenv("SPANPERF_KUBE_CONTEXTS"), ",")}
	spec := kube.Spec{Run: run, Image: env.Image}
	for i := range env.Contexts {
		spec.Sites = append(spec.Sites, env.Site(fmt.Sprintf("s%d", i), i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tb, err := kube.New(ctx, spec)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done() // the test kills us long before
	tb.Close()
	return 1
}

func connect(t *testing.T, env kubetest.Env, i int) *kube.Clients {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := kube.Connect(ctx, env.Site("x", i), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// allClients are the clients of every context in env.
func allClients(t *testing.T, env kubetest.Env) []*kube.Clients {
	var out []*kube.Clients
	for i := range env.Contexts {
		out = append(out, connect(t, env, i))
	}
	return out
}

// noNamespace fails t unless run's namespace is absent from every cluster.
func noNamespace(t *testing.T, env kubetest.Env, run string) {
	t.Helper()
	for _, c := range allClients(t, env) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, kube.Namespace(run), metav1.GetOptions{})
		cancel()
		if !apierrors.IsNotFound(err) {
			t.Errorf("context %s: namespace %s: %v, want it gone", c.Context, kube.Namespace(run), err)
		}
	}
	if _, err := os.Stat(filepath.Join(testbed.LedgerDir, run+".ledger")); err == nil {
		t.Errorf("ledger of run %s left behind", run)
	}
}

// newTestbed makes a testbed closed when the test ends.
func newTestbed(t *testing.T, spec kube.Spec) *kube.Testbed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	tb, err := kube.New(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run %s: %d agent pods Ready in %.1fs", spec.Run, len(spec.Sites), time.Since(t0).Seconds())
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// lineBuffer is a goroutine-safe buffer.
type lineBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newLineBuffer() *lineBuffer { return &lineBuffer{mu: make(chan struct{}, 1)} }
func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}
func (b *lineBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

// runClient runs `agent client ARGS` in site and returns its Result.
func runClient(t *testing.T, s *kube.Site, args ...string) (*agent.Result, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := agent.Command("agent-client", append([]string{"client"}, args...)...)
	cmd.Stdout = &out
	p, err := s.Exec(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		p.Stop(time.Second)
		t.Fatalf("client %v in %s: still running after 60s", args, s.Name())
	}
	werr := p.Wait()
	var res agent.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("client output %q: %v (exit: %v)", out.String(), err, werr)
	}
	return &res, werr
}

// TestTwoClusters: a site on each cluster; the agent server in b and an
// rr client in a across the clusters' pod IPs, and one in b by name
// (localhost, resolved inside the pod); Stop really stops the server;
// Close leaves nothing.
func TestTwoClusters(t *testing.T) {
	env := kubetest.Clusters(t, 2)
	run := kubetest.RunID("kubetb-two-")
	tb := newTestbed(t, kube.Spec{Run: run, Image: env.Image, Sites: []kube.SiteSpec{env.Site("a", 0), env.Site("b", 1)}})
	sites := tb.KubeSites()
	if len(sites) != 2 || sites[0].Name() != "a" || sites[1].Name() != "b" || len(tb.Sites()) != 2 {
		t.Fatalf("sites %v", tb.Sites())
	}
	a, b := sites[0], sites[1]
	for _, s := range sites {
		pod := s.Pod()
		if pod.Status.PodIP == "" || pod.Status.HostIP == "" || pod.Spec.NodeName == "" || pod.UID == "" {
			t.Errorf("site %s: pod %s: IP %q host %q node %q uid %q", s.Name(), pod.Name, pod.Status.PodIP, pod.Status.HostIP, pod.Spec.NodeName, pod.UID)
		}
		for k, v := range s.Selector() {
			if pod.Labels[k] != v {
				t.Errorf("site %s: selector %s=%s, pod has %q", s.Name(), k, v, pod.Labels[k])
			}
		}
		if s.Namespace() != kube.Namespace(run) {
			t.Errorf("site %s: namespace %s", s.Name(), s.Namespace())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ns, err := s.Clients().Kube.CoreV1().Namespaces().Get(ctx, s.Namespace(), metav1.GetOptions{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ns.Labels[kube.LabelRun] != run || ns.Annotations[kube.AnnotationOwnerPID] != fmt.Sprint(os.Getpid()) {
			t.Errorf("namespace %s: labels %v annotations %v", ns.Name, ns.Labels, ns.Annotations)
		}
	}
	if a.Clients().Context != env.Contexts[0] || b.Clients().Context != env.Contexts[1] {
		t.Errorf("contexts %s %s", a.Clients().Context, b.Clients().Context)
	}
	if st, err := os.Stat(tb.TempDir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("temp dir %s: %v %v", tb.TempDir(), st, err)
	}
	if tb.Ledger() == nil || tb.Ledger().Run() != run {
		t.Errorf("ledger %v", tb.Ledger())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Exec(ctx, testbed.Command{Name: "iperf3", Path: "iperf3"}); err == nil || !strings.Contains(err.Error(), "site a is a pod: it runs only the spanperf agent, not iperf3") {
		t.Errorf("a non-agent command: %v", err)
	}

	sout := newLineBuffer()
	srvCmd := agent.Command("agent-server", "serve", "--listen", ":7100")
	srvCmd.Stdout = sout
	srv, err := b.Exec(ctx, srvCmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(time.Second) })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(sout.String(), `"ready":true`) {
		select {
		case <-srv.Done():
			t.Fatalf("server ended: %v: %s", srv.Wait(), srv.Tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line from the server in 30s: %q", sout.String())
		}
	}
	target := b.Pod().Status.PodIP + ":7100"
	rrArgs := []string{"--mode", "rr", "--duration", "2s", "--request-size", "64", "--response-size", "64"}
	for _, c := range []struct {
		site   *kube.Site
		target string
	}{{a, target}, {b, "localhost:7100"}} {
		res, err := runClient(t, c.site, append(rrArgs, "--target", c.target)...)
		if err != nil {
			t.Fatalf("rr from %s to %s: %v", c.site.Name(), c.target, err)
		}
		tps := res.Metrics[results.TransactionsPerS]
		t.Logf("rr 64 B from %s to %s: %.0f transactions/s", c.site.Name(), c.target, tps)
		if !(tps > 0) {
			t.Errorf("rr from %s to %s: %s = %v, want > 0 (%+v)", c.site.Name(), c.target, results.TransactionsPerS, tps, res)
		}
	}

	t0 := time.Now()
	if err := srv.Stop(2 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	select {
	case <-srv.Done():
	default:
		t.Fatal("Stop returned before the process ended")
	}
	t.Logf("server stopped in %.1fs: %v", time.Since(t0).Seconds(), srv.Wait())
	if _, ok := kube.ExitStatus(srv.Wait()); !ok {
		t.Errorf("stopped server's error %v carries no exit status", srv.Wait())
	}
	// The stream's end is not the proof: a second exec finds nothing listening.
	res, err := runClient(t, a, "--mode", "rr", "--duration", "1s", "--request-size", "64", "--response-size", "64", "--target", target)
	if err == nil || res == nil || !strings.Contains(res.Error, "refused") {
		t.Errorf("client after Stop: %v (%+v), want connection refused", err, res)
	} else if code, ok := kube.ExitStatus(err); !ok || code != 1 {
		t.Errorf("client after Stop: exit status %d %v, want 1", code, ok)
	}

	tmp := tb.TempDir()
	t0 = time.Now()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %.1fs", time.Since(t0).Seconds())
	if err := tb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s: %v, want it gone", tmp, err)
	}
	noNamespace(t, env, run)
	if _, err := a.Exec(ctx, agent.Command("x", "sleep")); err == nil {
		t.Error("Exec after Close: no error")
	}
}

// TestOneCluster: two sites on one context share a namespace; with
// ShareNode both pods run on the one node; without, anti-affinity leaves
// the second unschedulable, and New says so, naming the pod, and leaves
// nothing.
func TestOneCluster(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	run := kubetest.RunID("kubetb-share-")
	tb := newTestbed(t, kube.Spec{Run: run, Image: env.Image, ShareNode: true,
		Sites: []kube.SiteSpec{env.Site("a", 0), env.Site("b", 0)}})
	a, b := tb.KubeSites()[0], tb.KubeSites()[1]
	if a.Namespace() != b.Namespace() || a.Pod().Spec.NodeName != b.Pod().Spec.NodeName || a.Pod().Name == b.Pod().Name {
		t.Errorf("pods %s/%s on %s, %s/%s on %s", a.Namespace(), a.Pod().Name, a.Pod().Spec.NodeName, b.Namespace(), b.Pod().Name, b.Pod().Spec.NodeName)
	}
	// A process left running is stopped by Close.
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel0()
	p, err := a.Exec(ctx0, agent.Command("agent-sleep", "sleep"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-p.Done():
		t.Fatalf("agent sleep ended: %v", p.Wait())
	default:
	}
	t0 := time.Now()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %.1fs, with a process running", time.Since(t0).Seconds())
	select {
	case <-p.Done():
	default:
		t.Error("Close returned with a process still running")
	}
	noNamespace(t, env, run)

	run = kubetest.RunID("kubetb-apart-")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 = time.Now()
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, ReadyTimeout: time.Minute,
		Sites: []kube.SiteSpec{env.Site("a", 0), env.Site("b", 0)}})
	t.Logf("%.1fs: %v", time.Since(t0).Seconds(), err)
	if err == nil {
		t.Fatal("two pods with anti-affinity on a one-node cluster: no error")
	}
	for _, want := range []string{"context " + env.Contexts[0], "pod " + kube.Namespace(run) + "/agent-", "phase Pending", "Unschedulable", "anti-affinity", "last event: FailedScheduling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if time.Since(t0) > 50*time.Second {
		t.Errorf("took %v: Unschedulable should fail fast", time.Since(t0))
	}
	noNamespace(t, env, run)
}

// TestBadImage: an image that cannot be pulled (its registry is a closed
// loopback port) fails New fast, naming the pod and the pull error; so
// does a ready timeout too short, naming the pod and where it was; and a
// ctx that ends mid-New. Each leaves nothing.
func TestBadImage(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	run := kubetest.RunID("kubetb-img-")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	_, err := kube.New(ctx, kube.Spec{Run: run, Image: "127.0.0.1:1/spanperf/none:none", ReadyTimeout: time.Minute,
		Sites: []kube.SiteSpec{env.Site("a", 0)}})
	t.Logf("%.1fs: %v", time.Since(t0).Seconds(), err)
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "ErrImagePull") && !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Errorf("error names neither ErrImagePull nor ImagePullBackOff")
	}
	if !strings.Contains(err.Error(), "pod "+kube.Namespace(run)+"/agent-a") || !strings.Contains(err.Error(), "last event:") {
		t.Errorf("error does not name the pod and its last event")
	}
	if time.Since(t0) > 50*time.Second {
		t.Errorf("took %v, want well within the ready timeout", time.Since(t0))
	}
	noNamespace(t, env, run)

	// A ready timeout shorter than a pod takes to start: the error names
	// the pod, the timeout and where the pod was.
	run = kubetest.RunID("kubetb-slow-")
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, ReadyTimeout: 300 * time.Millisecond, Sites: []kube.SiteSpec{env.Site("a", 0)}})
	t.Logf("short ready timeout: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pod "+kube.Namespace(run)+"/agent-a not Ready within 300ms: phase Pending") {
		t.Errorf("ready timeout: %v", err)
	}
	noNamespace(t, env, run)

	// ctx ends as soon as the namespace exists: New removes what it made,
	// and says why it stopped.
	run = kubetest.RunID("kubetb-cancel-")
	admin := connect(t, env, 0)
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	go func() {
		defer ccancel()
		for range 1000 {
			if _, err := admin.Kube.CoreV1().Namespaces().Get(cctx, kube.Namespace(run), metav1.GetOptions{}); err == nil || cctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t0 = time.Now()
	_, err = kube.New(cctx, kube.Spec{Run: run, Image: env.Image, Sites: []kube.SiteSpec{env.Site("a", 0)}})
	t.Logf("ctx cancelled: %.1fs: %v", time.Since(t0).Seconds(), err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("New when ctx ends: %v, want context.Canceled", err)
	}
	noNamespace(t, env, run)
}

// TestServerContainer: with a server image the pod's server container
// runs a program of that image (by PATH), with a file the agent wrote
// there, in the pod's one network namespace, and a program the image
// lacks fails naming the image, the pod and the container; a server
// image that cannot be pulled fails New naming the server container.
// Each leaves nothing.
func TestServerContainer(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := kubetest.RunID("kserver-srv-")
	// The agent image as the server image: it has /spanperf, in PATH=/.
	tb, err := kube.New(ctx, kube.Spec{Run: run, Image: env.Image, ServerImage: env.Image, Sites: []kube.SiteSpec{env.Site("a", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	site := tb.KubeSites()[0]
	write := testbed.Command{Name: "write", Agent: true, Server: true, Args: []string{"agent", "write", "/tmp/x/hello"}, Stdin: strings.NewReader("hi\n")}
	p, err := site.Exec(ctx, write)
	if err == nil {
		err = p.Wait()
	}
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	var out strings.Builder
	p, err = site.Exec(ctx, testbed.Command{Name: "cat", Path: "spanperf", Server: true, Args: []string{"agent", "cat", "/tmp/x/hello"}, Stdout: &out})
	if err == nil {
		err = p.Wait()
	}
	if err != nil || out.String() != "hi\n" {
		t.Errorf("cat by PATH in the server container: %q, %v", out.String(), err)
	}
	// The server container's CPU, by its cgroup (`agent cpu`), against
	// a known cost: `agent burn` of 0.5 cores for 3 s there.
	cpu := func() float64 {
		var out strings.Builder
		p, err := site.Exec(ctx, testbed.Command{Name: "cpu", Agent: true, Server: true, Args: []string{"agent", "cpu"}, Stdout: &out})
		if err == nil {
			err = p.Wait()
		}
		v, perr := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
		if err != nil || perr != nil {
			t.Fatalf("agent cpu: %q, %v, %v", out.String(), err, perr)
		}
		return v
	}
	c0 := cpu()
	p, err = site.Exec(ctx, testbed.Command{Name: "burn", Agent: true, Server: true, Args: []string{"agent", "burn", "--cores", "0.5", "--duration", "3s"}})
	if err == nil {
		err = p.Wait()
	}
	if err != nil {
		t.Fatalf("burn: %v", err)
	}
	if used := cpu() - c0; used < 1.35 || used > 1.7 {
		t.Errorf("server container's cgroup: %.3f CPU seconds over a burn of 0.5 cores × 3 s, want 1.5 (-10%%, +13%% for the execs)", used)
	} else {
		t.Logf("server container's cgroup: %.3f CPU seconds over a burn of 0.5 cores × 3 s", used)
	}
	p, err = site.Exec(ctx, testbed.Command{Name: "nginx", Path: "nginx", Server: true})
	if err == nil {
		err = p.Wait()
	}
	want := "nginx: not found in image " + env.Image + " (context " + site.Clients().Context + ": pod " + kube.Namespace(run) + "/agent-a, container server)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a program the image lacks: %v, want %q", err, want)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	noNamespace(t, env, run)

	run = kubetest.RunID("kserver-badsrv-")
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, ServerImage: "127.0.0.1:1/spanperf/none:none", ReadyTimeout: time.Minute,
		Sites: []kube.SiteSpec{env.Site("a", 0)}})
	t.Logf("bad server image: %v", err)
	if err == nil || !strings.Contains(err.Error(), "container server: ErrImagePull") && !strings.Contains(err.Error(), "container server: ImagePullBackOff") {
		t.Errorf("bad server image: %v, want the server container's pull error", err)
	}
	noNamespace(t, env, run)
}

// TestConnectErrors: an unreadable kubeconfig, an unknown context and an
// API server that does not answer (or refuses) each give an error naming
// them, in time.
func TestConnectErrors(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := kube.Connect(ctx, kube.SiteSpec{Kubeconfig: "/nonexistent/kubeconfig", Context: "x"}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "kubeconfig /nonexistent/kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte("clusters: [ {"), 0o600)
	_, err = kube.Connect(ctx, kube.SiteSpec{Kubeconfig: garbage}, time.Second)
	t.Logf("garbage: %v", err)
	if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig "+garbage+": ") {
		t.Errorf("unparsable kubeconfig: %v", err)
	}
	_, err = kube.Connect(ctx, kube.SiteSpec{Kubeconfig: env.Kubeconfig, Context: "foo"}, time.Second)
	want := fmt.Sprintf("kubeconfig %s: no context \"foo\" (contexts: ", env.Kubeconfig)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), env.Contexts[0]) {
		t.Errorf("unknown context: %v, want %q and the contexts", err, want)
	}
	run := kubetest.RunID("kubetb-noctx-")
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, Sites: []kube.SiteSpec{{Name: "a", Context: "foo", Kubeconfig: env.Kubeconfig}}})
	if err == nil || !strings.Contains(err.Error(), "site a: ") || !strings.Contains(err.Error(), `no context "foo"`) {
		t.Errorf("New, unknown context: %v", err)
	}
	noNamespace(t, env, run)

	// A copy of the kubeconfig whose server accepts connections and never
	// answers: a loopback listener that holds them. (An unrouted address in
	// 198.18.0.0/15 is no good here: this machine's default route leads to
	// a proxy that answers every HTTPS request, with 404.)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env.Kubeconfig)}, &clientcmd.ConfigOverrides{}).RawConfig()
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	raw.Clusters[raw.Contexts[env.Contexts[0]].Cluster].Server = dead
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(raw, path); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = kube.Connect(ctx, kube.SiteSpec{Kubeconfig: path, Context: env.Contexts[0]}, 3*time.Second)
	el := time.Since(t0)
	t.Logf("%.1fs: %v", el.Seconds(), err)
	if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "context "+env.Contexts[0]) {
		t.Errorf("unreachable: %v, want the context and %s", err, dead)
	}
	if el > 5*time.Second {
		t.Errorf("unreachable: took %v, timeout 3s", el)
	}
	t0 = time.Now()
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, ConnectTimeout: 3 * time.Second,
		Sites: []kube.SiteSpec{{Name: "a", Context: env.Contexts[0], Kubeconfig: path}}})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 3s") || time.Since(t0) > 5*time.Second {
		t.Errorf("New, unreachable: %v after %v", err, time.Since(t0))
	}
	noNamespace(t, env, run)
	ln.Close()
	_, err = kube.Connect(ctx, kube.SiteSpec{Kubeconfig: path, Context: env.Contexts[0]}, 3*time.Second)
	if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("refused: %v, want %s, refused", err, dead)
	}
}

// TestForbidden: a ServiceAccount's token without the Role: New's error,
// and Exec's, name the verb and resource that were refused.
func TestForbidden(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	admin := connect(t, env, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := kubetest.RunID("kubetb-rbac-")
	if _, err := admin.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(t, admin, ns) })
	if _, err := admin.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exp := int64(600)
	tok, err := admin.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: admin.Config.Host, InsecureSkipTLSVerify: admin.Config.Insecure, CertificateAuthorityData: admin.Config.CAData}
	kc.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["nobody"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "nobody"}
	kc.CurrentContext = "nobody"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	run := kubetest.RunID("kubetb-forbid-")
	_, err = kube.New(ctx, kube.Spec{Run: run, Image: env.Image, Sites: []kube.SiteSpec{{Name: "a", Kubeconfig: path}}})
	t.Logf("New: %v", err)
	if err == nil || !strings.Contains(err.Error(), "context nobody: create namespaces: ") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("New as a ServiceAccount without the Role: %v, want it to name create namespaces, forbidden", err)
	}
	noNamespace(t, env, run)

	c, err := kube.Connect(ctx, kube.SiteSpec{Kubeconfig: path}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Exec(ctx, ns, "agent-a", kube.AgentContainer, []string{"/spanperf", "version"}, nil, nil, nil)
	t.Logf("Exec: %v", err)
	if err == nil || !strings.Contains(err.Error(), "context nobody: create pods/exec in "+ns+": ") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Exec as a ServiceAccount without the Role: %v, want it to name create pods/exec, forbidden", err)
	}
}

func deleteNamespace(t *testing.T, c *kube.Clients, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	for ctx.Err() == nil {
		if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("namespace %s not gone in 2m", ns)
}

// TestCleanAfterKill: a controller that made a testbed is killed (-9);
// Clean removes its namespaces, leaves a live run's alone and says why,
// and removes a live run when asked for it by name.
func TestCleanAfterKill(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	prefix := kubetest.RunID("kubetb-clean-") + "-"
	liveRun, deadRun := prefix+"live", prefix+"dead"
	live := newTestbed(t, kube.Spec{Run: liveRun, Image: env.Image, Sites: []kube.SiteSpec{env.Site("a", 0)}})

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+deadRun, "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		os.Remove(filepath.Join(testbed.LedgerDir, deadRun+".ledger"))
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			t.Fatalf("child: %q", s)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("child: not ready in 3m")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	clusters := allClients(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := kube.Clean(ctx, clusters, kube.CleanOptions{RunPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clean: removed %v; left %v", rep.Removed, rep.Left)
	if len(rep.Removed) != len(env.Contexts) {
		t.Errorf("removed %v, want the dead run's namespace in each of %d clusters", rep.Removed, len(env.Contexts))
	}
	for _, r := range rep.Removed {
		if r.Run != deadRun || !strings.Contains(r.Reason, "dead") {
			t.Errorf("removed %v", r)
		}
	}
	if len(rep.Left) != 1 || rep.Left[0].Run != liveRun || !strings.HasPrefix(rep.Left[0].Reason, "live") {
		t.Errorf("left %v, want the live run, live", rep.Left)
	}
	os.Remove(filepath.Join(testbed.LedgerDir, deadRun+".ledger")) // kube.Clean removes namespaces only
	noNamespace(t, env, deadRun)
	if _, err := clusters[0].Kube.CoreV1().Namespaces().Get(ctx, kube.Namespace(liveRun), metav1.GetOptions{}); err != nil {
		t.Errorf("live run's namespace: %v", err)
	}

	rep, err = kube.Clean(ctx, clusters, kube.CleanOptions{RunPrefix: prefix, Run: liveRun})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].Run != liveRun || !strings.Contains(rep.Removed[0].Reason, "named") {
		t.Errorf("clean by name: %v %v", rep, err)
	}
	if err := live.Close(); err != nil {
		t.Errorf("Close after its namespace was cleaned: %v", err)
	}
	noNamespace(t, env, liveRun)
}

// TestEvicted: the agent pod is evicted (the Eviction API) while a process
// runs in it: the process's error says so.
func TestEvicted(t *testing.T) {
	env := kubetest.Clusters(t, 1)
	run := kubetest.RunID("kubetb-evict-")
	tb := newTestbed(t, kube.Spec{Run: run, Image: env.Image, Sites: []kube.SiteSpec{env.Site("a", 0)}})
	a := tb.KubeSites()[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := a.Exec(ctx, agent.Command("agent-sleep", "sleep"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := a.Clients().Kube.CoreV1().Pods(a.Namespace()).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: a.Pod().Name, Namespace: a.Namespace()}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("process still running 30s after its pod's eviction")
	}
	err = p.Wait()
	t.Logf("after eviction: %v", err)
	if err == nil || !strings.Contains(err.Error(), "pod "+a.Namespace()+"/"+a.Pod().Name) ||
		!(strings.Contains(err.Error(), "EvictionByEvictionAPI") || strings.Contains(err.Error(), "is gone")) {
		t.Errorf("process error after eviction: %v, want it to name the pod and the eviction", err)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	noNamespace(t, env, run)
}
