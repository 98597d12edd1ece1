package kubedp

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// The shapes of what Serve creates (pure logic); TestKubeDiscovery and
// TestKubeFailover in internal/cli run it against the local clusters.

// TestServePodShape: the server pod runs the agent image's `agent serve`
// on the port, named after its site, placed as the site's agent pod, and
// is selected by its Service alone.
func TestServePodShape(t *testing.T) {
	east, _ := twoFakeSites(nil, nil)
	east.pod.Spec.Containers[0].Image = "reg/spanperf:1"
	east.pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	east.pod.Spec.NodeSelector = map[string]string{"zone": "a"}
	p, err := servePod(east, 7301)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	switch {
	case p.Name != "spanperf-serve-7301-east" || p.Namespace != fakeNS:
		t.Errorf("pod %s/%s", p.Namespace, p.Name)
	case c.Image != "reg/spanperf:1" || c.ImagePullPolicy != corev1.PullNever:
		t.Errorf("image %s (%s), want the agent container's", c.Image, c.ImagePullPolicy)
	case strings.Join(c.Command, " ") != "/spanperf agent serve --listen :7301 --name east":
		t.Errorf("command %q", c.Command)
	case p.Spec.NodeSelector["zone"] != "a" || *p.Spec.TerminationGracePeriodSeconds != 1:
		t.Errorf("placement %v, grace %d", p.Spec.NodeSelector, *p.Spec.TerminationGracePeriodSeconds)
	case p.Labels[kube.LabelComponent] != ComponentServer || p.Labels[kube.LabelRun] == "" || p.Labels[LabelServe] != p.Name:
		t.Errorf("labels %v", p.Labels)
	}
	// The agent pod's selector must not select the server pod (the
	// baselines' Services select the agent pod).
	if p.Labels[kube.LabelComponent] == kube.ComponentAgent {
		t.Error("the server pod is labelled as an agent pod")
	}
	for typ, want := range map[corev1.ServiceType]string{"": corev1.ClusterIPNone, corev1.ServiceTypeNodePort: ""} {
		s := serveService(east, 7301, typ)
		if s.Spec.Selector[LabelServe] != p.Name || len(s.Spec.Selector) != 1 || s.Spec.ClusterIP != want || s.Spec.Ports[0].Port != 7301 {
			t.Errorf("type %q: service %+v", typ, s.Spec)
		}
	}
	east.pod.Spec.Containers[0].Name = "other"
	if _, err := servePod(east, 7301); err == nil || !strings.Contains(err.Error(), "has no agent container") {
		t.Errorf("a pod without the agent container: %v", err)
	}
}

// TestImportSlice: the client cluster's EndpointSlice belongs to the
// Service without selector, is managed by spanperf (so that the cluster's
// controller leaves it alone), and holds the one server asked for, ready;
// none for the zero Target.
func TestImportSlice(t *testing.T) {
	east, _ := twoFakeSites(nil, nil)
	s := importSlice(east, 7301, testbed.Target{Host: "198.18.144.7", Port: 31234})
	if s.Labels[discoveryv1.LabelServiceName] != importName(7301) || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		t.Errorf("labels %v", s.Labels)
	}
	if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "198.18.144.7" || !*s.Endpoints[0].Conditions.Ready ||
		len(s.Ports) != 1 || *s.Ports[0].Port != 31234 || *s.Ports[0].Name != importService(east, 7301).Spec.Ports[0].Name {
		t.Errorf("slice %+v", s)
	}
	if svc := importService(east, 7301); svc.Spec.Selector != nil || svc.Name != s.Name {
		t.Errorf("service %+v", svc)
	}
	if e := importSlice(east, 7301, testbed.Target{}); len(e.Endpoints) != 0 {
		t.Errorf("zero target: %+v", e.Endpoints)
	}
}

// TestServeCapabilities: k8s-pod and k8s-nodeport can run discovery and
// failover; the other adapters say why not, so the plan leaves them out.
func TestServeCapabilities(t *testing.T) {
	for _, c := range []struct {
		name string
		dp   datapath.Datapath
		ok   bool
		why  string
	}{
		{PodName, Pod{}, true, ""},
		{NodePortName, &Service{Type: corev1.ServiceTypeNodePort}, true, ""},
		{ClusterIPName, &Service{Type: corev1.ServiceTypeClusterIP}, false, "NodePort only"},
		{LoadBalancerName, &Service{Type: corev1.ServiceTypeLoadBalancer}, false, "NodePort only"},
		{HostNetName, HostNet{}, false, "host-network"},
		{SkupperName, &Skupper{}, false, "golden files"},
		{SubmarinerName, &Submariner{}, false, "golden files"},
	} {
		for _, need := range []string{datapath.NeedExpose, datapath.NeedRedundant} {
			err := datapath.CheckCapability(c.name, c.dp, need, "mesh")
			if c.ok != (err == nil) || (err != nil && need == datapath.NeedExpose && !strings.Contains(err.Error(), c.why)) {
				t.Errorf("%s %s: %v", c.name, need, err)
			}
		}
	}
}
