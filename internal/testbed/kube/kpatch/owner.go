package kpatch

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// RefForPod finds what to patch to size container of a running pod (a
// component found by its label selector): the Deployment (through the
// pod's ReplicaSet), DaemonSet or StatefulSet that controls it. A pod
// with no such controller (a bare pod, a Job's, a ReplicaSet of its own)
// is an error naming the pod and its controller. The Ref's Kubeconfig is
// left for the caller.
func RefForPod(ctx context.Context, c *kube.Clients, namespace, pod, container string) (Ref, error) {
	p, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return Ref{}, ownerErr(c, "get", "pods", namespace, pod, err)
	}
	ref := Ref{Namespace: namespace, Container: container}
	if _, _, err := containerPath(&p.Spec, container); err != nil {
		return Ref{}, fmt.Errorf("pod %s/%s in context %s: %w", namespace, pod, c.Context, err)
	}
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return Ref{}, fmt.Errorf("pod %s/%s in context %s: no controller: only the pods of a Deployment, DaemonSet or StatefulSet can be sized", namespace, pod, c.Context)
	}
	switch owner.Kind {
	case "DaemonSet", "StatefulSet":
		ref.Kind, ref.Name = Kind(owner.Kind), owner.Name
		return ref, nil
	case "ReplicaSet":
		rs, err := c.Kube.AppsV1().ReplicaSets(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil {
			return Ref{}, ownerErr(c, "get", "replicasets.apps", namespace, owner.Name, err)
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			ref.Kind, ref.Name = Deployment, d.Name
			return ref, nil
		}
		return Ref{}, fmt.Errorf("pod %s/%s in context %s: its replicaset %s has no deployment: only the pods of a Deployment, DaemonSet or StatefulSet can be sized", namespace, pod, c.Context, owner.Name)
	}
	return Ref{}, fmt.Errorf("pod %s/%s in context %s: controlled by %s %s: only the pods of a Deployment, DaemonSet or StatefulSet can be sized", namespace, pod, c.Context, owner.Kind, owner.Name)
}

func ownerErr(c *kube.Clients, verb, resource, ns, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %s/%s not found in context %s: %w", resource, ns, name, c.Context, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s/%s in context %s: forbidden to %s %s in namespace %s: %w", ns, name, c.Context, verb, resource, ns, err)
	}
	return fmt.Errorf("%s %s %s/%s in context %s: %w", verb, resource, ns, name, c.Context, err)
}
