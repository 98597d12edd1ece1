package nodeprobe

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spanperf/spanperf/internal/results"
)

func pod(name, uid, node string, containers ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, ContainerID: "containerd://id-" + c})
	}
	return p
}

// Plan gives every node the run has a pod on a Spec, places each
// component on its pod's node with its container's ID, and makes every
// pod (and the other clusters') the run's own.
func TestPlan(t *testing.T) {
	pods := []corev1.Pod{
		pod("client", "u-client", "n1", "agent"),
		pod("server", "u-server", "n2", "agent"),
		pod("router", "u-router", "n2", "router", "config-sync"),
		pod("pending", "u-pending", ""),
	}
	base := Spec{Window: Duration(10 * time.Second), RunPods: []string{"u-other-cluster"}}
	comps := []results.Component{
		{Name: "router@b", PodUID: "u-router", Container: "router"},
		{Name: "router-pod@b", PodUID: "u-router"},
	}
	specs, err := Plan(base, comps, pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 {
		t.Fatalf("specs for %d nodes, want n1 and n2: %+v", len(specs), specs)
	}
	n1, n2 := specs["n1"], specs["n2"]
	wantRun := []string{"u-client", "u-other-cluster", "u-pending", "u-router", "u-server"}
	if n1.Node != "n1" || len(n1.Components) != 0 || !slices.Equal(n1.RunPods, wantRun) || n1.Window != base.Window {
		t.Errorf("n1: %+v", n1)
	}
	want := []Component{
		{Name: "router@b", PodUID: "u-router", Container: "router", ContainerID: "containerd://id-router"},
		{Name: "router-pod@b", PodUID: "u-router"},
	}
	if !slices.Equal(n2.Components, want) || !slices.Equal(n2.RunPods, wantRun) {
		t.Errorf("n2: %+v", n2)
	}
	for _, c := range []struct {
		comp results.Component
		want string
	}{
		{results.Component{Name: "x", Namespace: "ns", Pod: "gone", PodUID: "u-gone"}, "component x: pod ns/gone (uid u-gone) is not among the run's pods"},
		{results.Component{Name: "y", PodUID: "u-router", Container: "sidecar"}, "component y: pod ns/router has no started container sidecar"},
		{results.Component{Name: "z", PodUID: "u-pending"}, "component z: pod ns/pending is on no node"},
	} {
		if _, err := Plan(base, []results.Component{c.comp}, pods); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.comp.Name, err, c.want)
		}
	}
}
