package kpatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// workload reaches one object of ref.Kind through the typed clients.
type workload struct {
	c   *kube.Clients
	ref Ref
}

// object is what kpatch needs of a Deployment, DaemonSet or StatefulSet.
type object struct {
	meta     *metav1.ObjectMeta
	pod      *corev1.PodSpec
	selector *metav1.LabelSelector
	// problem, when not "", is why a change to the template would not
	// roll out (a paused Deployment, an OnDelete strategy, a partition).
	problem string
	// done says whether the rollout of the current generation finished;
	// status says how far it is when not.
	done   bool
	status string
}

func workloadFor(c *kube.Clients, ref Ref) (*workload, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	if c == nil || c.Kube == nil {
		return nil, fmt.Errorf("%s: no clients", ref)
	}
	return &workload{c: c, ref: ref}, nil
}

// what names the object: "deployment ns/name".
func (w *workload) what() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(string(w.ref.Kind)), w.ref.Namespace, w.ref.Name)
}

// resource is the API resource of the kind, as RBAC names it.
func (w *workload) resource() string {
	return strings.ToLower(string(w.ref.Kind)) + "s.apps"
}

// apiErr gives an API error its context: not found names the object and
// context; forbidden names the verb and the resource.
func (w *workload) apiErr(verb string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s not found in context %s: %w", w.what(), w.c.Context, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s in context %s: forbidden to %s %s in namespace %s: %w", w.what(), w.c.Context, verb, w.resource(), w.ref.Namespace, err)
	}
	return fmt.Errorf("%s %s in context %s: %w", verb, w.what(), w.c.Context, err)
}

func (w *workload) get(ctx context.Context) (*object, error) {
	ns, name := w.ref.Namespace, w.ref.Name
	opts := metav1.GetOptions{}
	var o object
	switch w.ref.Kind {
	case Deployment:
		d, err := w.c.Kube.AppsV1().Deployments(ns).Get(ctx, name, opts)
		if err != nil {
			return nil, w.apiErr("get", err)
		}
		o = object{meta: &d.ObjectMeta, pod: &d.Spec.Template.Spec, selector: d.Spec.Selector}
		if d.Spec.Paused {
			o.problem = "the deployment is paused: a new limit would not roll out"
		}
		o.done, o.status = deploymentDone(d)
	case DaemonSet:
		d, err := w.c.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, opts)
		if err != nil {
			return nil, w.apiErr("get", err)
		}
		o = object{meta: &d.ObjectMeta, pod: &d.Spec.Template.Spec, selector: d.Spec.Selector}
		if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
			o.problem = "updateStrategy is OnDelete: running pods would keep the old limit"
		}
		o.done, o.status = daemonSetDone(d)
	case StatefulSet:
		s, err := w.c.Kube.AppsV1().StatefulSets(ns).Get(ctx, name, opts)
		if err != nil {
			return nil, w.apiErr("get", err)
		}
		o = object{meta: &s.ObjectMeta, pod: &s.Spec.Template.Spec, selector: s.Spec.Selector}
		switch ru := s.Spec.UpdateStrategy.RollingUpdate; {
		case s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType:
			o.problem = "updateStrategy is OnDelete: running pods would keep the old limit"
		case ru != nil && ru.Partition != nil && *ru.Partition > 0:
			o.problem = fmt.Sprintf("rollingUpdate.partition is %d: pods below it would keep the old limit", *ru.Partition)
		}
		o.done, o.status = statefulSetDone(s)
	}
	return &o, nil
}

// container returns ref's container in the template and its JSON pointer.
func (o *object) container(ref Ref) (*corev1.Container, string, error) {
	return containerPath(o.pod, ref.Container)
}

// patch sends a JSON patch.
func (w *workload) patch(ctx context.Context, verb string, ops []jsonOp) error {
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	ns, name, opts := w.ref.Namespace, w.ref.Name, metav1.PatchOptions{FieldManager: "spanperf"}
	switch w.ref.Kind {
	case Deployment:
		_, err = w.c.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.JSONPatchType, b, opts)
	case DaemonSet:
		_, err = w.c.Kube.AppsV1().DaemonSets(ns).Patch(ctx, name, types.JSONPatchType, b, opts)
	case StatefulSet:
		_, err = w.c.Kube.AppsV1().StatefulSets(ns).Patch(ctx, name, types.JSONPatchType, b, opts)
	}
	if err != nil {
		return w.apiErr(verb, err)
	}
	return nil
}

// replicas is a spec's replica count (nil is 1).
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func deploymentDone(d *appsv1.Deployment) (bool, string) {
	want := replicas(d.Spec.Replicas)
	st := d.Status
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, "progress deadline exceeded: " + c.Message
		}
	}
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration)
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas still running", st.Replicas-st.UpdatedReplicas)
	case st.ReadyReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want)
	case st.AvailableReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
	}
	return true, fmt.Sprintf("%d replicas updated and available", want)
}

func daemonSetDone(d *appsv1.DaemonSet) (bool, string) {
	st := d.Status
	want := st.DesiredNumberScheduled
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration)
	case st.UpdatedNumberScheduled < want:
		return false, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, want)
	case st.NumberAvailable < want:
		return false, fmt.Sprintf("%d of %d pods available", st.NumberAvailable, want)
	}
	return true, fmt.Sprintf("%d pods updated and available", want)
}

func statefulSetDone(s *appsv1.StatefulSet) (bool, string) {
	want := replicas(s.Spec.Replicas)
	st := s.Status
	switch {
	case st.ObservedGeneration < s.Generation:
		return false, fmt.Sprintf("generation %d not yet observed (observed %d)", s.Generation, st.ObservedGeneration)
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	case st.UpdateRevision != "" && st.CurrentRevision != st.UpdateRevision:
		return false, fmt.Sprintf("revision %s not yet current (current %s)", st.UpdateRevision, st.CurrentRevision)
	case st.ReadyReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want)
	case st.AvailableReplicas < want:
		return false, fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, want)
	}
	return true, fmt.Sprintf("%d replicas updated and available", want)
}

// waitRollout waits, at most timeout, until the object's current
// generation has rolled out. The error on timeout names the object and
// context, how far the rollout got (or the last error), and the newest
// event of the object's pods.
func (w *workload) waitRollout(ctx context.Context, timeout time.Duration) error {
	// last is the newest status read; a read that failed (the API server
	// slow, or the client's rate limiter near the deadline) is reported
	// only when no status was read at all.
	last, lastErr := "", "no status read"
	err := poll(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		o, err := w.get(ctx)
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return false, err
			}
			lastErr = "last error: " + err.Error()
			return false, nil
		}
		last = o.status
		if strings.HasPrefix(o.status, "progress deadline exceeded") {
			return false, errors.New(o.status)
		}
		return o.done, nil
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, errTimeout) {
		return fmt.Errorf("rollout of %s in context %s: %w", w.what(), w.c.Context, err)
	}
	if last == "" {
		last = lastErr
	}
	ev := ""
	// The event lookup gets its own short bound: ctx may be what ended.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if e := w.newestPodEvent(ectx); e != "" {
		ev = "; newest pod event: " + e
	}
	return fmt.Errorf("rollout of %s in context %s: %w after %s (%s)%s", w.what(), w.c.Context, errTimeout, timeout, last, ev)
}

// newestPodEvent returns the newest event of the object's pods, as "pod
// NAME: REASON: MESSAGE", or "" if there is none or it cannot be read.
func (w *workload) newestPodEvent(ctx context.Context) string {
	o, err := w.get(ctx)
	if err != nil || o.selector == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(o.selector)
	if err != nil {
		return ""
	}
	pods, err := w.c.Kube.CoreV1().Pods(w.ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return ""
	}
	mine := map[string]bool{}
	for _, p := range pods.Items {
		mine[p.Name] = true
	}
	evs, err := w.c.Kube.CoreV1().Events(w.ref.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil {
		return ""
	}
	var cand []corev1.Event
	for _, e := range evs.Items {
		if mine[e.InvolvedObject.Name] {
			cand = append(cand, e)
		}
	}
	if len(cand) == 0 {
		return ""
	}
	sort.SliceStable(cand, func(i, j int) bool { return eventTime(cand[i]).Before(eventTime(cand[j])) })
	e := cand[len(cand)-1]
	return fmt.Sprintf("pod %s: %s: %s", e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message))
}

// eventTime is when an event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// errTimeout marks a wait that ran out of time.
var errTimeout = errors.New("timeout")

// poll calls cond every interval until it returns true (nil), an error
// (that error), or timeout passes or ctx ends (errTimeout, or ctx's error).
func poll(ctx context.Context, timeout, interval time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctxErr(ctx)
			}
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-t.C:
		}
	}
}

// ctxErr is errTimeout when ctx's deadline passed, else ctx's error.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errTimeout
	}
	return ctx.Err()
}
