package kpatch

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string // "" for an error
	}{
		{0.25, "250m"}, {1.5, "1500m"}, {2, "2"}, {int64(1), "1"}, {"500m", "500m"}, {"1.5", "1500m"},
		{mustQ("100m"), "100m"}, {0.0, ""}, {-1.0, ""}, {0.0001, ""}, {"0", ""}, {"abc", ""}, {true, ""},
	} {
		q, err := ParseCPU(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseCPU(%v) = %s, want an error", tc.in, q.String())
		case tc.want != "" && err != nil:
			t.Errorf("ParseCPU(%v): %v", tc.in, err)
		case tc.want != "" && q.Cmp(resource.MustParse(tc.want)) != 0:
			t.Errorf("ParseCPU(%v) = %s, want %s", tc.in, q.String(), tc.want)
		}
	}
}

func TestWithLimit(t *testing.T) {
	none := corev1.ResourceRequirements{}
	res, note := withLimit(none, mustQ("250m"))
	if res.Limits.Cpu().String() != "250m" || res.Requests != nil || note != "" {
		t.Errorf("no resources: %+v %q", res, note)
	}
	if none.Limits != nil {
		t.Error("withLimit changed its argument")
	}
	res, note = withLimit(limited, mustQ("50m"))
	if res.Limits.Cpu().String() != "50m" || res.Requests.Cpu().String() != "50m" || !strings.Contains(note, "requests.cpu 100m was above the new limit: lowered to 50m") {
		t.Errorf("request above the limit: %+v %q", res, note)
	}
	if res.Limits.Memory().String() != "32Mi" || limited.Limits.Cpu().String() != "1" {
		t.Errorf("memory or the original changed: %+v, %+v", res, limited)
	}
}

func TestAllowed(t *testing.T) {
	ref := Ref{Kind: Deployment, Namespace: "skupper", Name: "skupper-router", Container: "router"}
	if err := Allowed(true, "router", ref, "east"); err != nil {
		t.Errorf("allowed: %v", err)
	}
	err := Allowed(false, "router", ref, "east")
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("not allowed: %v does not wrap ErrNotAllowed", err)
	}
	for _, w := range []string{"limits.router", "deployment skupper/skupper-router container router", "context east", "allow_patch: true"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

func TestAnnPath(t *testing.T) {
	if got := annPath("spanperf.io/original-resources"); got != "/metadata/annotations/spanperf.io~1original-resources" {
		t.Errorf("annPath = %s", got)
	}
	if got := annPath("a~b/c"); got != "/metadata/annotations/a~0b~1c" {
		t.Errorf("annPath = %s", got)
	}
}

// TestRolloutDone: the rollout rules on status fixtures (the real rollouts
// are in TestPatchAndRestore).
func TestRolloutDone(t *testing.T) {
	two := int32(2)
	dep := func(gen, obs int64, st appsv1.DeploymentStatus) *appsv1.Deployment {
		st.ObservedGeneration = obs
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &two}, Status: st}
	}
	full := appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	for _, tc := range []struct {
		d    *appsv1.Deployment
		done bool
		says string
	}{
		{dep(2, 2, full), true, "2 replicas updated"},
		{dep(3, 2, full), false, "generation 3 not yet observed"},
		{dep(2, 2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}), false, "1 old replicas"},
		{dep(2, 2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}), false, "1 of 2 replicas updated"},
		{dep(2, 2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1}), false, "1 of 2 replicas available"},
		{dep(2, 2, appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "took too long"}}}), false, "progress deadline exceeded: took too long"},
	} {
		done, says := deploymentDone(tc.d)
		if done != tc.done || !strings.Contains(says, tc.says) {
			t.Errorf("deployment %+v: %v %q, want %v %q", tc.d.Status, done, says, tc.done, tc.says)
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 4}, Status: appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}}
	if done, says := daemonSetDone(ds); done || says != "2 of 3 pods available" {
		t.Errorf("daemonset: %v %q", done, says)
	}
	ds.Status.NumberAvailable = 3
	if done, _ := daemonSetDone(ds); !done {
		t.Error("daemonset: not done when all are updated and available")
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: &two},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}}
	if done, says := statefulSetDone(sts); done || !strings.Contains(says, "revision b not yet current") {
		t.Errorf("statefulset: %v %q", done, says)
	}
	sts.Status.CurrentRevision = "b"
	if done, _ := statefulSetDone(sts); !done {
		t.Error("statefulset: not done at its update revision")
	}
}

func TestRefValidate(t *testing.T) {
	if err := (Ref{Kind: "ReplicaSet", Namespace: "a", Name: "b", Container: "c"}).Validate(); err == nil {
		t.Error("ReplicaSet accepted")
	}
	if err := (Ref{Kind: Deployment, Namespace: "a", Name: "b"}).Validate(); err == nil || !strings.Contains(err.Error(), "deployment a/b container ") {
		t.Errorf("no container: %v", err)
	}
}
