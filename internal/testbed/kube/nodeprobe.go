package kube

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
)

// The node probe: a DaemonSet whose pods share their node's PID namespace,
// in which the controller execs `/spanperf agent nodeprobe` with a spec on
// stdin (package nodeprobe). It is privileged: a run creates it only with
// `probe: node`.
const (
	// NodeProbeName names the DaemonSet and its container.
	NodeProbeName = "spanperf-node-probe"
	// NodeProbeComponent is the LabelComponent of the node probe's pods.
	NodeProbeComponent = "node-probe"
)

// NodeProbeCommand is the node probe pod's main process: it waits for
// SIGTERM; the probe itself is exec'd beside it.
var NodeProbeCommand = []string{"/spanperf", "agent", "sleep"}

// NodeProbeDaemonSet returns the node probe's DaemonSet for run, in
// namespace ns, from image (spanperf at /spanperf), on the nodes
// nodeSelector selects (nil: every node; it tolerates every taint). Its
// pods use the host's PID namespace (their /proc is the node's: every
// process, and its cgroup), run privileged with a read-only root, see the
// node's /sys/fs/cgroup read-only, have no API credentials, and learn
// their node's name from nodeprobe.NodeNameEnv.
func NodeProbeDaemonSet(ns, run, image string, nodeSelector map[string]string) *appsv1.DaemonSet {
	labels := NodeProbeSelector(run)
	yes, no := true, false
	grace := int64(5)
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeProbeName, Namespace: ns, Labels: maps.Clone(labels)},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec: corev1.PodSpec{
					HostPID:                       true,
					NodeSelector:                  maps.Clone(nodeSelector),
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:            NodeProbeName,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         NodeProbeCommand,
						Env: []corev1.EnvVar{{Name: nodeprobe.NodeNameEnv, ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						SecurityContext: &corev1.SecurityContext{Privileged: &yes, ReadOnlyRootFilesystem: &yes},
						VolumeMounts:    []corev1.VolumeMount{{Name: "cgroup", MountPath: "/sys/fs/cgroup", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "cgroup", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/sys/fs/cgroup"}}}},
				},
			},
		},
	}
}

// NodeProbeSelector is the label set of run's node probe pods.
func NodeProbeSelector(run string) map[string]string {
	return map[string]string{LabelRun: run, LabelComponent: NodeProbeComponent}
}

// NodeProbeRules are the Role rules the controller needs for the node
// probe, beyond the run's (pods, pods/exec): the DaemonSet itself.
func NodeProbeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"},
		Resources: []string{"daemonsets"},
		Verbs:     []string{"create", "get", "list", "watch", "delete"},
	}}
}

// NodeProbeNamespaceLabels let a privileged pod into the run's namespace
// where Pod Security Admission enforces a stricter level.
func NodeProbeNamespaceLabels() map[string]string {
	return map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
}

// ShapeNodeProbe adds to shape what the node probe needs of the run's
// namespaces and Role.
func ShapeNodeProbe(shape *PodShape) {
	if shape.NamespaceLabels == nil {
		shape.NamespaceLabels = map[string]string{}
	}
	maps.Copy(shape.NamespaceLabels, NodeProbeNamespaceLabels())
	shape.Rules = append(shape.Rules, NodeProbeRules()...)
}

// StartNodeProbe creates the node probe DaemonSet of run in namespace ns of
// cluster c and waits, up to timeout, until each of nodes has a Ready probe
// pod; it returns their names by node. A probe pod that will never be
// Ready (a failed image pull, a crash) fails the wait at once, naming it.
func StartNodeProbe(ctx context.Context, c *Clients, ns, run, image string, nodes []string, timeout time.Duration) (map[string]string, error) {
	ds := NodeProbeDaemonSet(ns, run, image, nil)
	if _, err := c.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("node probe: context %s: create daemonset %s/%s: %w", c.Context, ns, ds.Name, err)
	}
	sel := labels.SelectorFromSet(NodeProbeSelector(run)).String()
	var probes map[string]string
	err := poll(ctx, 500*time.Millisecond, timeout, "the node probe on nodes "+strings.Join(nodes, ", "), func(ctx context.Context) (bool, error) {
		l, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		probes = map[string]string{}
		var waiting error
		for i := range l.Items {
			p := &l.Items[i]
			if podReady(p) {
				probes[p.Spec.NodeName] = p.Name
				continue
			}
			state, fatal := podState(p)
			waiting = fmt.Errorf("pod %s/%s on node %s: %s", ns, p.Name, p.Spec.NodeName, state)
			if fatal {
				return false, permanent{waiting}
			}
		}
		for _, n := range nodes {
			if probes[n] == "" {
				if waiting == nil {
					waiting = fmt.Errorf("no probe pod on node %s yet", n)
				}
				return false, waiting
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("node probe: context %s: %w", c.Context, err)
	}
	return probes, nil
}
