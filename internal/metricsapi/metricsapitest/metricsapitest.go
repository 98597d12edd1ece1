// Package metricsapitest gives tests the real clusters' metrics API and a
// pod of known CPU to read through it.
package metricsapitest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/metricsapi"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kubetest"
)

// Served connects to the environment's clusters, or skips t saying why:
// no clusters named (kubetest.Clusters), or a cluster without the metrics
// API (test/kube/metrics-server.sh up N installs metrics-server).
func Served(t testing.TB) (kubetest.Env, []*kube.Clients) {
	t.Helper()
	env := kubetest.Clusters(t, 1)
	var cs []*kube.Clients
	for i := range env.Contexts {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := kube.Connect(ctx, env.Site(fmt.Sprintf("site%d", i), i), 20*time.Second)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := metricsapi.Served(c.Kube.Discovery(), c.Context); errors.Is(err, metricsapi.ErrNotServed) {
			t.Skipf("%v (test/kube/metrics-server.sh up N)", err)
		} else if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return env, cs
}

// BurnPod is a pod "burn" that burns cores for d (`agent burn`) in its
// container "burn", beside an idle container "idle".
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

// Burn runs BurnPod (for 3 minutes) in a namespace of t's own on c,
// deleted in t.Cleanup (waiting until it is gone), and waits until the
// metrics API has a reading of the burn alone (its window begins after
// the burn did). It returns the pod's burn container.
func Burn(t testing.TB, c *kube.Clients, image string, cores float64) metricsapi.Pod {
	t.Helper()
	run := kubetest.RunID("ma")
	ns := kube.Namespace(run)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, BurnPod(image, cores, 3*time.Minute), metav1.CreateOptions{}); err != nil {
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
	t0 := time.Now()
	if err := waitFor(ctx, func() error {
		s, err := metricsapi.Read(ctx, c.Dynamic, burn)
		if err != nil {
			return err
		}
		// StartedAt has whole seconds.
		if s.Start().Before(started.Add(time.Second)) {
			return fmt.Errorf("reading %v+%v begins before the burn (%v)", s.Start(), s.Window, started)
		}
		return nil
	}); err != nil {
		t.Fatalf("context %s: %v", c.Context, err)
	}
	t.Logf("context %s: first reading of the burn alone %.1f s after it ran", c.Context, time.Since(t0).Seconds())
	return burn
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
