package metricsapi_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/metricsapi"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kubetest"
)

// served connects to the environment's first cluster, or skips the test
// saying why: no clusters named, or no metrics API there
// (test/kube/metrics-server.sh up N installs metrics-server).
func served(t *testing.T) (kubetest.Env, *kube.Clients) {
	t.Helper()
	env := kubetest.Clusters(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := kube.Connect(ctx, env.Site("east", 0), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := metricsapi.Served(c.Kube.Discovery(), c.Context); errors.Is(err, metricsapi.ErrNotServed) {
		t.Skipf("%v (test/kube/metrics-server.sh up N)", err)
	} else if err != nil {
		t.Fatal(err)
	}
	return env, c
}

// testNamespace creates a namespace of the test's own, labelled as a
// run's (so that `spanperf clean --kube` finds it after a crash), and
// deletes it in t.Cleanup, waiting until it is gone.
func testNamespace(t *testing.T, c *kube.Clients) string {
	t.Helper()
	run := kubetest.RunID("ma")
	ns := kube.Namespace(run)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{kube.LabelRun: run}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("context %s: create namespace %s: %v", c.Context, ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("context %s: delete namespace %s: %v", c.Context, ns, err)
			return
		}
		if err := waitFor(ctx, func() error {
			_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s still there (%v)", ns, err)
		}); err != nil {
			t.Errorf("context %s: %v", c.Context, err)
		}
	})
	return ns
}

// waitFor calls f every 500 ms until it returns nil or ctx ends; then it
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
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// BurnPod is a pod that burns cores for d (`agent burn`) in its container
// "burn", beside an idle one.
func BurnPod(image string, cores float64, d time.Duration) *corev1.Pod {
	never := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "burn", Labels: map[string]string{kube.LabelComponent: "burn"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &never,
			Containers: []corev1.Container{
				{Name: "burn", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/spanperf", "agent", "burn", "--cores", fmt.Sprint(cores), "--duration", d.String()}},
				{Name: "idle", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"/spanperf", "agent", "sleep"}},
			},
		},
	}
}

// Known answer, on the real cluster with metrics-server: a pod of the
// test's own burns 0.3 cores (`agent burn`) beside an idle container.
// Once the metrics API has a reading of the burn alone, readings taken
// every 2 s through a 30 s measured window give the burn container
// 0.3 ± 0.05 cores, from readings whose windows lie inside the measured
// one, and the pod within 0.02 cores more. A 5 s window, shorter than
// metrics-server's 10 s resolution, holds no reading's window: the
// figure is missing (ErrNoWindow), not made up.
func TestKnownBurn(t *testing.T) {
	env, c := served(t)
	ns := testNamespace(t, c)
	const cores = 0.3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, BurnPod(env.Image, cores, 2*time.Minute), metav1.CreateOptions{}); err != nil {
		t.Fatalf("context %s: create pod %s/burn: %v", c.Context, ns, err)
	}
	var started time.Time
	if err := waitFor(ctx, func() error {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "burn", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "burn" && s.State.Running != nil {
				started = s.State.Running.StartedAt.Time
				return nil
			}
		}
		return fmt.Errorf("pod %s/burn: phase %s, burn not running", ns, p.Status.Phase)
	}); err != nil {
		t.Fatalf("context %s: %v", c.Context, err)
	}
	burn := metricsapi.Pod{Namespace: ns, Name: "burn", Container: "burn"}
	whole := metricsapi.Pod{Namespace: ns, Name: "burn"}
	// The first reading's window may begin before the burn did.
	t0 := time.Now()
	if err := waitFor(ctx, func() error {
		s, err := metricsapi.Read(ctx, c.Dynamic, burn)
		if err != nil {
			return err
		}
		if s.Start().Before(started.Add(time.Second)) {
			return fmt.Errorf("reading %v+%v begins before the burn (%v)", s.Start(), s.Window, started)
		}
		return nil
	}); err != nil {
		t.Fatalf("context %s: %v", c.Context, err)
	}
	t.Logf("first reading of the burn alone %.1f s after it ran (started %v)", time.Since(t0).Seconds(), started.UTC().Format("15:04:05"))

	r := metricsapi.Record(ctx, c.Dynamic, []metricsapi.Pod{burn, whole}, 0)
	start := time.Now()
	end := start.Add(30 * time.Second)
	time.Sleep(time.Until(end.Add(time.Second)))
	samples, errs := r.Stop(ctx)
	if len(errs) > 0 {
		t.Logf("reading errors: %v", errs)
	}
	for i, s := range samples[burn] {
		if i == 0 || !s.Time.Equal(samples[burn][i-1].Time) {
			t.Logf("reading %s+%v: %.4f cores", s.Start().UTC().Format("15:04:05.000"), s.Window, s.Cores)
		}
	}
	f, err := metricsapi.FigureOf(samples[burn], start, end)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := metricsapi.FigureOf(samples[whole], start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured window %s+30s: burn %.4f cores over %v from %d readings; pod %.4f", start.UTC().Format("15:04:05.000"), f.Cores, f.Covered, f.Samples, fw.Cores)
	if math.Abs(f.Cores-cores) > 0.05 {
		t.Errorf("burn %.4f cores, injected %.1f: want ±0.05", f.Cores, cores)
	}
	if f.Covered < 15*time.Second || f.Covered > 30*time.Second {
		t.Errorf("readings cover %v of a 30 s window: want 15–30 s", f.Covered)
	}
	if fw.Cores < f.Cores || fw.Cores-f.Cores > 0.02 {
		t.Errorf("pod %.4f cores, burn %.4f: want the burn and at most 0.02 more (an idle container)", fw.Cores, f.Cores)
	}
	short := end.Add(-5 * time.Second)
	if f, err := metricsapi.FigureOf(samples[burn], short, end); !errors.Is(err, metricsapi.ErrNoWindow) {
		t.Errorf("5 s window: %+v, %v; want ErrNoWindow", f, err)
	} else {
		t.Logf("5 s window: %v", err)
	}
}
