package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
)

// permanent marks an error that ends a poll at once.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// poll calls cond every interval until it reports done, returns a
// permanent error (returned as is, still a permanent), or timeout passes or ctx ends: then
// the error says what was awaited, for how long, and the last error (or
// state) cond reported, e.g. "timeout after 2m0s waiting for pod x Ready:
// phase Pending".
func poll(ctx context.Context, interval, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		var p permanent
		if errors.As(err, &p) {
			return false, err
		}
		if err != nil {
			last = err
		}
		return done, nil
	})
	if err == nil {
		return nil
	}
	var p permanent
	if errors.As(err, &p) {
		return err // still marked permanent: the caller may tell it apart
	}
	if ctx.Err() != nil {
		err = ctx.Err()
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	if last != nil {
		return fmt.Errorf("timeout after %v waiting for %s: %w", timeout, what, last)
	}
	return fmt.Errorf("timeout after %v waiting for %s", timeout, what)
}

// fatalWaiting are the reasons a container waits that no waiting mends.
var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true,
	"RunContainerError": true,
}

// podReady reports whether pod is Ready.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState says where pod is on its way to Ready ("phase Pending: Unschedulable:
// 0/1 nodes ..."), and whether it will never get there (a failed image
// pull, an unschedulable pod, an agent that exited).
func podState(pod *corev1.Pod) (state string, fatal bool) {
	state = "phase " + string(pod.Status.Phase)
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		fatal = true
		if pod.Status.Reason != "" {
			state += ": " + pod.Status.Reason
		}
		if pod.Status.Message != "" {
			state += ": " + pod.Status.Message
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			state += ": " + c.Reason
			if c.Message != "" {
				state += ": " + c.Message
			}
			if c.Reason == corev1.PodReasonUnschedulable {
				fatal = true
			}
			return state, fatal
		}
	}
	// An init container that exited 0 has done its work.
	var statuses []corev1.ContainerStatus
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			statuses = append(statuses, cs)
		}
	}
	for _, cs := range append(statuses, pod.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			w := cs.State.Waiting
			if cs.Name != AgentContainer {
				// The server image or the init container: say which.
				state += ": container " + cs.Name
			}
			state += ": " + w.Reason
			if w.Message != "" {
				state += ": " + w.Message
			}
			if fatalWaiting[w.Reason] {
				fatal = true
			}
		case cs.State.Terminated != nil:
			state += ": " + terminated(cs.Name, cs.State.Terminated)
			fatal = true
		}
		if t := cs.LastTerminationState.Terminated; t != nil && !fatal {
			state += ": " + terminated(cs.Name, t)
			fatal = true
		}
	}
	return state, fatal
}

func terminated(name string, t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("container %s exited with status %d", name, t.ExitCode)
	if t.Signal != 0 {
		s = fmt.Sprintf("container %s killed by signal %d", name, t.Signal)
	}
	if t.Reason != "" {
		s += " (" + t.Reason + ")"
	}
	if t.Message != "" {
		s += ": " + strings.TrimSpace(t.Message)
	}
	return s
}

// lastEvent is the newest Event about pod ns/name, "REASON: MESSAGE", or
// "" when there is none (events are written a little after the fact:
// it looks for up to settle).
func lastEvent(ctx context.Context, c *Clients, ns, name string, settle time.Duration) string {
	deadline := time.Now().Add(settle)
	for {
		sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": name}.AsSelector().String()
		list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil && len(list.Items) > 0 {
			ev := list.Items
			sort.SliceStable(ev, func(i, j int) bool { return eventTime(&ev[i]).Before(eventTime(&ev[j])) })
			e := ev[len(ev)-1]
			return e.Reason + ": " + strings.TrimSpace(e.Message)
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return ""
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// eventTime is when an event last happened.
func eventTime(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	if e.FirstTimestamp.After(t) {
		t = e.FirstTimestamp.Time
	}
	if e.LastTimestamp.After(t) {
		t = e.LastTimestamp.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}
