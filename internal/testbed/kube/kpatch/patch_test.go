package kpatch

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/testbed"
)

// TestPatchAndRestore patches a Deployment's container (with a request and
// a limit), a DaemonSet's (with neither) and a StatefulSet's (a request of
// 300m, no limit: the request is lowered) to 250m: the rollout finished,
// the new pods' container has limits.cpu 250m, and (known answer) its
// cgroup's CFS quota is 0.25 of its period. Restore puts back the exact
// resources (no limit for the DaemonSet and the StatefulSet: quota -1
// again) and removes the
// annotations.
func TestPatchAndRestore(t *testing.T) {
	c, kc := cluster(t)
	ns := namespace(t, c)
	createDeployment(t, c, ns, "dep", nil)
	createDaemonSet(t, c, ns, "ds")
	createStatefulSet(t, c, ns, "sts")
	refs := []Ref{
		{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: kc},
		{Kind: DaemonSet, Namespace: ns, Name: "ds", Container: "main", Kubeconfig: kc},
		{Kind: StatefulSet, Namespace: ns, Name: "sts", Container: "main", Kubeconfig: kc},
	}
	for _, ref := range refs {
		waitReady(t, c, ref)
		// The component as the runner finds it, a pod, leads to its object.
		pod := livePods(t, c, ref)[0]
		got, err := RefForPod(context.Background(), c, ns, pod.Name, "main")
		if want := (Ref{Kind: ref.Kind, Namespace: ns, Name: ref.Name, Container: "main"}); err != nil || got != want {
			t.Errorf("RefForPod(%s) = %+v, %v; want %+v", pod.Name, got, err, want)
		}
	}
	if _, err := RefForPod(context.Background(), c, ns, livePods(t, c, refs[0])[0].Name, "router"); err == nil || !strings.Contains(err.Error(), "containers: main, side") {
		t.Errorf("RefForPod of a missing container: %v", err)
	}
	ledger := newLedger(t)
	ctx := context.Background()
	cpu := mustQ("250m")
	for _, ref := range refs {
		t.Run(string(ref.Kind), func(t *testing.T) {
			orig, origAnn := snapshot(t, c, ref)
			t0 := time.Now()
			p, err := Patch(ctx, c, ref, cpu, ledger, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: patched and rolled out in %s", ref, time.Since(t0).Round(time.Millisecond))
			if ref.Kind == StatefulSet {
				// Its request, 300m, is above the new limit.
				if !strings.Contains(p.Note(), "requests.cpu 300m was above the new limit: lowered to 250m") {
					t.Errorf("note %q does not say the request was lowered", p.Note())
				}
			} else if p.Note() != "" {
				t.Errorf("note %q: the request was not above the limit", p.Note())
			}
			got, ann := snapshot(t, c, ref)
			if ann[AnnotationRun] != ledger.Run() || ann[AnnotationOriginal] != orig {
				t.Errorf("annotations %v, want run %s and original %s", ann, ledger.Run(), orig)
			}
			var res corev1.ResourceRequirements
			json.Unmarshal([]byte(got), &res)
			if q := res.Limits[corev1.ResourceCPU]; q.Cmp(cpu) != 0 {
				t.Errorf("template limits.cpu %s, want 250m", q.String())
			}
			if o := p.Original(); ref.Kind != StatefulSet && !o.Requests.Cpu().Equal(*res.Requests.Cpu()) {
				t.Errorf("requests.cpu %s changed from %s", res.Requests.Cpu(), o.Requests.Cpu())
			}
			pods := livePods(t, c, ref)
			if len(pods) != 1 {
				t.Fatalf("%d live pods after the rollout, want 1", len(pods))
			}
			for _, pod := range pods {
				lim := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
				if lim.Cmp(cpu) != 0 {
					t.Errorf("pod %s: limits.cpu %s, want 250m", pod.Name, lim.String())
				}
				if q, dir, ok := cfsQuota(t, pod, "main"); !ok {
					t.Logf("pod %s: its cgroup is not on this machine; quota not checked", pod.Name)
				} else if math.Abs(q-0.25) > 1e-9 {
					t.Errorf("pod %s: cgroup %s: quota/period %v cores, want 0.25", pod.Name, dir, q)
				} else {
					t.Logf("pod %s: cgroup %s: quota/period = %v cores", pod.Name, dir, q)
				}
			}
			ents, err := testbed.ReadLedger(ledger.Path())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range ents {
				if e.Kind == testbed.KindKubePatch && e.Kube.Name == ref.Name && e.Kube.Kind == string(ref.Kind) {
					found = string(e.Kube.Original) == orig && e.Kube.Context == c.Context && e.Kube.Kubeconfig == kc && e.Kube.Container == "main"
				}
			}
			if !found {
				t.Errorf("no kube-patch entry with original %s in the ledger: %+v", orig, ents)
			}

			if err := p.Restore(ctx); err != nil {
				t.Fatal(err)
			}
			back, ann := snapshot(t, c, ref)
			if back != orig {
				t.Errorf("restored resources %s, want %s", back, orig)
			}
			if _, ok := ann[AnnotationRun]; ok || len(ann) != len(origAnn) {
				t.Errorf("annotations after restore %v, want %v", ann, origAnn)
			}
			for _, pod := range livePods(t, c, ref) {
				if got, _ := json.Marshal(pod.Spec.Containers[0].Resources); string(got) != orig {
					t.Errorf("pod %s after restore: resources %s, want %s", pod.Name, got, orig)
				}
				want := 1.0
				if ref.Kind != Deployment {
					want = -1 // no limit
				}
				if q, dir, ok := cfsQuota(t, pod, "main"); ok && q != want {
					t.Errorf("pod %s after restore: cgroup %s: quota %v cores, want %v", pod.Name, dir, q, want)
				}
			}
			if err := p.Restore(ctx); err != nil {
				t.Errorf("second restore: %v", err)
			}
		})
	}
}

// TestRepatchLowersRequest patches twice in one run: the second, to a limit
// under the CPU request, lowers the request to it and says so; one Restore
// then brings back the resources from before the first.
func TestRepatchLowersRequest(t *testing.T) {
	c, kc := cluster(t)
	ns := namespace(t, c)
	createDeployment(t, c, ns, "dep", nil)
	ref := Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: kc}
	waitReady(t, c, ref)
	ledger := newLedger(t)
	ctx := context.Background()
	orig, _ := snapshot(t, c, ref)
	if _, err := Patch(ctx, c, ref, mustQ("500m"), ledger, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := Patch(ctx, c, ref, mustQ("50m"), ledger, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Note(), "requests.cpu 100m") || !strings.Contains(p.Note(), "lowered to 50m") {
		t.Errorf("note %q does not say the request was lowered", p.Note())
	}
	got, ann := snapshot(t, c, ref)
	var res corev1.ResourceRequirements
	json.Unmarshal([]byte(got), &res)
	if res.Limits.Cpu().String() != "50m" || res.Requests.Cpu().String() != "50m" {
		t.Errorf("after the second patch: %s, want request and limit 50m", got)
	}
	if res.Limits.Memory().String() != "32Mi" || res.Requests.Memory().String() != "16Mi" {
		t.Errorf("after the second patch: memory changed: %s", got)
	}
	if ann[AnnotationOriginal] != orig {
		t.Errorf("annotation original %s, want the first original %s", ann[AnnotationOriginal], orig)
	}
	if err := p.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if back, _ := snapshot(t, c, ref); back != orig {
		t.Errorf("restored %s, want %s", back, orig)
	}
}

// TestPatchErrors: what cannot be patched is refused with an error that
// names it, and nothing is changed.
func TestPatchErrors(t *testing.T) {
	c, kc := cluster(t)
	ns := namespace(t, c)
	createDeployment(t, c, ns, "dep", nil)
	createDeployment(t, c, ns, "stuck", func(d *appsv1.Deployment) {
		d.Spec.Selector.MatchLabels = map[string]string{"app": "stuck"}
		d.Spec.Template.Labels = map[string]string{"app": "stuck"}
		d.Spec.Template.Spec.NodeSelector = map[string]string{"spanperf.io/no-such-node": "x"}
	})
	createDeployment(t, c, ns, "paused", func(d *appsv1.Deployment) {
		d.Spec.Selector.MatchLabels = map[string]string{"app": "paused"}
		d.Spec.Template.Labels = map[string]string{"app": "paused"}
		d.Spec.Paused = true
	})
	ref := Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: kc}
	waitReady(t, c, ref)
	ledger := newLedger(t)
	ctx := context.Background()
	orig, _ := snapshot(t, c, ref)

	cases := []struct {
		name string
		ref  Ref
		want []string
	}{
		{"no object", Ref{Kind: Deployment, Namespace: ns, Name: "nope", Container: "main"}, []string{"deployment " + ns + "/nope not found in context " + c.Context}},
		{"no container", Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "router"}, []string{`no container "router"`, "containers: main, side", "deployment " + ns + "/dep", c.Context}},
		{"wrong kind", Ref{Kind: DaemonSet, Namespace: ns, Name: "dep", Container: "main"}, []string{"daemonset " + ns + "/dep not found"}},
		{"paused", Ref{Kind: Deployment, Namespace: ns, Name: "paused", Container: "main"}, []string{"deployment " + ns + "/paused in context " + c.Context + ": the deployment is paused"}},
		{"bad kind", Ref{Kind: "Pod", Namespace: ns, Name: "dep", Container: "main"}, []string{`kind "Pod"`}},
	}
	for _, tc := range cases {
		_, err := Patch(ctx, c, tc.ref, mustQ("250m"), ledger, 30*time.Second)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
	if _, err := Patch(ctx, c, ref, mustQ("250m"), nil, 30*time.Second); err == nil || !strings.Contains(err.Error(), "no ledger") {
		t.Errorf("patch without a ledger: %v", err)
	}

	// Another run's patch is left alone.
	other, err := Patch(ctx, c, ref, mustQ("300m"), ledger, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l2 := newLedgerIn(t, "pt"+randHex(3))
	_, err = Patch(ctx, c, ref, mustQ("250m"), l2, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "already patched by run "+ledger.Run()) {
		t.Errorf("patch of an object another run patched: %v", err)
	}
	if err := other.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ann := snapshot(t, c, ref); got != orig || ann[AnnotationRun] != "" {
		t.Errorf("after the refusals and a restore: %s %v, want %s", got, ann, orig)
	}

	// A rollout that cannot finish: timeout naming object, context and the
	// pods' newest event; the patch is undone.
	stuck := Ref{Kind: Deployment, Namespace: ns, Name: "stuck", Container: "main"}
	stuckOrig, _ := snapshot(t, c, stuck)
	t0 := time.Now()
	_, err = Patch(ctx, c, stuck, mustQ("250m"), ledger, 5*time.Second)
	if err == nil {
		t.Fatal("patch of an unschedulable deployment: no error")
	}
	t.Logf("after %s: %v", time.Since(t0).Round(time.Millisecond), err)
	if time.Since(t0) > 40*time.Second {
		t.Errorf("took %s with 5s timeouts", time.Since(t0))
	}
	for _, w := range []string{"rollout of deployment " + ns + "/stuck in context " + c.Context, "timeout after 5s", "FailedScheduling"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q", w)
		}
	}
	if !errors.Is(err, errTimeout) {
		t.Errorf("error is not a timeout")
	}
	if got, ann := snapshot(t, c, stuck); got != stuckOrig || ann[AnnotationRun] != "" {
		t.Errorf("after the failed patch: %s %v, want %s and no annotation", got, ann, stuckOrig)
	}
}

// newLedgerIn makes a second ledger in the LedgerDir newLedger set.
func newLedgerIn(t *testing.T, run string) *testbed.Ledger {
	t.Helper()
	l, err := testbed.NewLedger(run, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Remove() })
	return l
}
