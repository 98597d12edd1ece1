package kube

import (
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/testbed"
)

func TestSpecValidate(t *testing.T) {
	site := SiteSpec{Name: "a", Context: "c"}
	for _, c := range []struct {
		spec Spec
		want string // "" = valid
	}{
		{Spec{Run: "abc123", Image: "i", Sites: []SiteSpec{site}}, ""},
		{Spec{Run: "", Image: "i", Sites: []SiteSpec{site}}, `run ""`},
		{Spec{Run: "Upper", Image: "i", Sites: []SiteSpec{site}}, `run "Upper": namespace spanperf-Upper: not a DNS label`},
		{Spec{Run: strings.Repeat("x", 60), Image: "i", Sites: []SiteSpec{site}}, "not a DNS label"},
		{Spec{Run: "r", Image: "i"}, "no sites"},
		{Spec{Run: "r", Sites: []SiteSpec{site}}, "no agent image"},
		{Spec{Run: "r", Image: "i", Sites: []SiteSpec{site, site}}, `site "a": named twice`},
		{Spec{Run: "r", Image: "i", Sites: []SiteSpec{{Name: "A_b"}}}, `site "A_b": pod agent-A_b: not a DNS label`},
		{Spec{Run: "r", Image: "i", Sites: []SiteSpec{site}, PullPolicy: "Sometimes"}, `pull policy "Sometimes"`},
	} {
		c.spec.Normalize()
		err := c.spec.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	var s Spec
	s.Normalize()
	if s.PullPolicy != corev1.PullIfNotPresent || s.ReadyTimeout != DefaultReadyTimeout || s.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("defaults %+v", s)
	}
}

func TestPodFor(t *testing.T) {
	spec := Spec{Run: "r1", Image: "img", Shape: PodShape{HostNetwork: true, PodLabels: map[string]string{"x": "y", LabelRun: "not-mine"}, PodAnnotations: map[string]string{"a": "b"}}}
	site := SiteSpec{Name: "west", NodeSelector: map[string]string{"role": "bench"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}}
	p := PodFor(spec, site)
	c := p.Spec.Containers[0]
	switch {
	case p.Name != "agent-west" || p.Namespace != "spanperf-r1":
		t.Errorf("name %s/%s", p.Namespace, p.Name)
	case p.Labels[LabelRun] != "r1" || p.Labels[LabelSite] != "west" || p.Labels[LabelComponent] != ComponentAgent || p.Labels["x"] != "y":
		t.Errorf("labels %v", p.Labels)
	case p.Annotations["a"] != "b":
		t.Errorf("annotations %v", p.Annotations)
	case !p.Spec.HostNetwork || p.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet:
		t.Errorf("host network %v dns %s", p.Spec.HostNetwork, p.Spec.DNSPolicy)
	case p.Spec.NodeSelector["role"] != "bench" || len(p.Spec.Tolerations) != 1:
		t.Errorf("placement %v %v", p.Spec.NodeSelector, p.Spec.Tolerations)
	case c.Image != "img" || c.ImagePullPolicy != corev1.PullIfNotPresent || strings.Join(c.Command, " ") != "/spanperf agent sleep":
		t.Errorf("container %+v", c)
	case len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" || p.Spec.Volumes[0].EmptyDir == nil:
		t.Errorf("no emptyDir at /tmp: %+v %+v", c.VolumeMounts, p.Spec.Volumes)
	case *p.Spec.TerminationGracePeriodSeconds > 5 || *p.Spec.AutomountServiceAccountToken:
		t.Errorf("grace %d automount %v", *p.Spec.TerminationGracePeriodSeconds, *p.Spec.AutomountServiceAccountToken)
	}
	aa := p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(aa) != 1 || aa[0].TopologyKey != "kubernetes.io/hostname" || aa[0].LabelSelector.MatchLabels[LabelRun] != "r1" || aa[0].LabelSelector.MatchLabels[LabelComponent] != ComponentAgent {
		t.Errorf("anti-affinity %+v", aa)
	}
	spec.ShareNode = true
	if p := PodFor(spec, site); p.Spec.Affinity != nil {
		t.Errorf("ShareNode: affinity %+v", p.Spec.Affinity)
	}
}

func TestPodState(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}}}
	}
	for _, c := range []struct {
		pod   *corev1.Pod
		want  string
		fatal bool
	}{
		{waiting("ContainerCreating"), "phase Pending: ContainerCreating: m", false},
		{waiting("ErrImagePull"), "phase Pending: ErrImagePull: m", true},
		{waiting("ImagePullBackOff"), "ImagePullBackOff", true},
		{waiting("InvalidImageName"), "InvalidImageName", true},
		{waiting("CrashLoopBackOff"), "CrashLoopBackOff", true},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes"}}}}, "phase Pending: Unschedulable: 0/1 nodes", true},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}}}, "container agent exited with status 2 (Error)", true},
		{&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low memory"}}, "phase Failed: Evicted: low memory", true},
	} {
		got, fatal := podState(c.pod)
		if !strings.Contains(got, c.want) || fatal != c.fatal {
			t.Errorf("%q fatal %v, want %q fatal %v", got, fatal, c.want, c.fatal)
		}
	}
}

func TestVerdict(t *testing.T) {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, err := testbed.ProcStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	ann := func(h string, pid int, start uint64) map[string]string {
		return map[string]string{AnnotationOwnerHost: h, AnnotationOwnerPID: strconv.Itoa(pid), AnnotationOwnerStart: strconv.FormatUint(start, 10)}
	}
	for _, c := range []struct {
		a    map[string]string
		want string
		dead bool
	}{
		{ann(host, pid, start), "live", false},
		{ann(host, pid, start+1), "dead", true}, // the PID is another process's now
		{ann(host, 1<<30, 1), "dead", true},     // no such PID
		{ann("elsewhere", 1<<30, 1), "owned by host elsewhere", false},
		{nil, "no owner", false},
		{map[string]string{AnnotationOwnerHost: host, AnnotationOwnerPID: "x"}, "bad owner pid", false},
	} {
		got, dead := verdict(c.a, host)
		if !strings.Contains(got, c.want) || dead != c.dead {
			t.Errorf("%v: %q %v, want %q %v", c.a, got, dead, c.want, c.dead)
		}
	}
}

// TestPodForServerImage: with a server image the pod gets a second
// container from it, which sleeps through the agent copied into an
// emptyDir by an init container from the agent image, and shares /tmp
// with the agent's; without one, the pod has the agent's container alone.
func TestPodForServerImage(t *testing.T) {
	spec := Spec{Run: "r1", Image: "img", ServerImage: "srv", PullPolicy: corev1.PullNever}
	p := PodFor(spec, SiteSpec{Name: "west"})
	if len(p.Spec.Containers) != 2 || len(p.Spec.InitContainers) != 1 {
		t.Fatalf("containers %d, init containers %d, want 2 and 1", len(p.Spec.Containers), len(p.Spec.InitContainers))
	}
	ini, srv := p.Spec.InitContainers[0], p.Spec.Containers[1]
	mounts := func(c corev1.Container) map[string]string {
		m := map[string]string{}
		for _, v := range c.VolumeMounts {
			m[v.Name] = v.MountPath
		}
		return m
	}
	switch {
	case ini.Name != CopyContainer || ini.Image != "img" || strings.Join(ini.Command, " ") != "/spanperf agent write --mode 0755 --from /spanperf "+ServerAgentPath:
		t.Errorf("init container %+v", ini)
	case srv.Name != ServerContainer || srv.Image != "srv" || srv.ImagePullPolicy != corev1.PullNever || strings.Join(srv.Command, " ") != ServerAgentPath+" agent sleep":
		t.Errorf("server container %+v", srv)
	case mounts(ini)["agent-bin"] != "/.spanperf" || mounts(srv)["agent-bin"] != "/.spanperf" || mounts(srv)["tmp"] != "/tmp" || mounts(p.Spec.Containers[0])["tmp"] != "/tmp":
		t.Errorf("mounts: init %v, server %v, agent %v", mounts(ini), mounts(srv), mounts(p.Spec.Containers[0]))
	}
	spec.ServerImage = ""
	if p := PodFor(spec, SiteSpec{Name: "west"}); len(p.Spec.Containers) != 1 || len(p.Spec.InitContainers) != 0 {
		t.Errorf("without a server image: %d containers, %d init containers", len(p.Spec.Containers), len(p.Spec.InitContainers))
	}
}
