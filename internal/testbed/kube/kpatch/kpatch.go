// Package kpatch sizes a solution's component on a cluster: it patches the
// CPU limit of one container of a Deployment, DaemonSet or StatefulSet,
// waits for the rollout, and restores the original resources afterwards.
//
// Every patch is recorded twice before (or as) it takes effect: in the run's
// ledger (testbed.KindKubePatch, written and synced before the patch is
// sent) and on the object itself (AnnotationOriginal, AnnotationRun, sent in
// the same request as the new limit). The annotation is what says the object
// is still patched: RestoreFromLedger restores an entry only while its
// object carries the run's annotation, so restoring twice, or restoring an
// object that was never patched (a crash between ledger and patch) or that
// was deleted, is harmless.
package kpatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Kind is the kind (apps/v1) of a patchable workload object.
type Kind string

// Patchable kinds.
const (
	Deployment  Kind = "Deployment"
	DaemonSet   Kind = "DaemonSet"
	StatefulSet Kind = "StatefulSet"
)

// Annotations a patch puts on the object, removed by Restore.
const (
	// AnnotationOriginal holds the patched container's resources as they
	// were (core/v1 ResourceRequirements as JSON).
	AnnotationOriginal = "spanperf.io/original-resources"
	// AnnotationRun holds the ID of the run that patched the object.
	AnnotationRun = "spanperf.io/patched-by-run"
)

// DefaultTimeout bounds a rollout wait when no timeout is given.
const DefaultTimeout = 5 * time.Minute

// Ref names one container of a workload object in a cluster.
type Ref struct {
	// Kind is Deployment, DaemonSet or StatefulSet.
	Kind Kind
	// Namespace and Name name the object.
	Namespace, Name string
	// Container is the container to size: a container of the pod
	// template, or a native sidecar (an init container).
	Container string
	// Kubeconfig is the kubeconfig file the clients were made from ("" is
	// the default loading rules); the ledger records it so that `spanperf
	// clean --kube` can connect again after a crash.
	Kubeconfig string
}

// String names the object and container: "deployment ns/name container c".
func (r Ref) String() string {
	return fmt.Sprintf("%s %s/%s container %s", strings.ToLower(string(r.Kind)), r.Namespace, r.Name, r.Container)
}

// Validate checks that every field is set and the kind is patchable.
func (r Ref) Validate() error {
	switch r.Kind {
	case Deployment, DaemonSet, StatefulSet:
	default:
		return fmt.Errorf("kind %q: only Deployment, DaemonSet and StatefulSet can be patched", r.Kind)
	}
	if r.Namespace == "" || r.Name == "" || r.Container == "" {
		return fmt.Errorf("%s: namespace, name and container must all be set", r)
	}
	return nil
}

// ErrNotAllowed is returned (wrapped) by Allowed when the scenario does not
// allow patching.
var ErrNotAllowed = errors.New("patching the cluster is not allowed")

// Allowed is the runner's gate: it returns nil when allowPatch (the
// scenario's `allow_patch: true`) is set, and otherwise an error wrapping
// ErrNotAllowed that names the limit key, the object and the context, and
// says how to allow it.
func Allowed(allowPatch bool, key string, ref Ref, context string) error {
	if allowPatch {
		return nil
	}
	return fmt.Errorf("limits.%s: sizing on a cluster patches the CPU limit of %s in context %s, which changes that installation until the run restores it; set `allow_patch: true` in the scenario to allow it: %w", key, ref, context, ErrNotAllowed)
}

// ParseCPU converts a CPU amount, as a scenario gives it, to a quantity:
// cores as a number (0.25, 2) or a Kubernetes quantity string ("250m",
// "1.5"). It must be more than 0 and at least 1m.
func ParseCPU(v any) (resource.Quantity, error) {
	var q resource.Quantity
	switch x := v.(type) {
	case resource.Quantity:
		q = x
	case float64:
		q = *resource.NewMilliQuantity(int64(x*1000+0.5), resource.DecimalSI)
		if x <= 0 || x*1000 < 1 {
			return q, fmt.Errorf("cpu %v: must be at least 0.001 cores", x)
		}
	case int:
		q = *resource.NewQuantity(int64(x), resource.DecimalSI)
	case int64:
		q = *resource.NewQuantity(x, resource.DecimalSI)
	case string:
		var err error
		if q, err = resource.ParseQuantity(x); err != nil {
			return q, fmt.Errorf("cpu %q: %w", x, err)
		}
	default:
		return q, fmt.Errorf("cpu %v: not a number of cores or a quantity", v)
	}
	if q.MilliValue() < 1 {
		return q, fmt.Errorf("cpu %s: must be at least 1m", q.String())
	}
	return q, nil
}

// Patched is a patch in effect. Restore undoes it.
type Patched struct {
	c        *kube.Clients
	ref      Ref
	run      string
	original corev1.ResourceRequirements
	timeout  time.Duration
	note     string
}

// Ref is the patched container.
func (p *Patched) Ref() Ref { return p.ref }

// Original is the container's resources before the run patched it.
func (p *Patched) Original() corev1.ResourceRequirements { return *p.original.DeepCopy() }

// Note says what the patch changed besides limits.cpu ("" for nothing):
// the CPU request, when it was above the new limit, is lowered to it.
func (p *Patched) Note() string { return p.note }

// Patch sets limits.cpu of ref's container to cpu in the cluster of c,
// and waits (at most timeout; 0 is DefaultTimeout) until the rollout has
// finished: every pod runs the new spec and is available.
//
// Before anything changes, the container's original resources are added to
// ledger (which must not be nil: an unrecorded patch could not be undone
// after a crash). The patch itself puts them, with the run ID, in
// annotations on the object. requests.cpu is kept unless it is above the
// new limit; then it is set to the limit, and Note says so.
//
// Patching an object this run has already patched changes the limit again
// and keeps the first original. An object patched by another run is
// refused (`spanperf clean --kube` restores those of dead runs). A rollout
// that does not finish in time is undone (the original resources put back)
// and the error names the object, the context and the newest pod event.
func Patch(ctx context.Context, c *kube.Clients, ref Ref, cpu resource.Quantity, ledger *testbed.Ledger, timeout time.Duration) (*Patched, error) {
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	if ledger == nil {
		return nil, fmt.Errorf("patch %s in context %s: no ledger: a patch must be recorded so that it can be restored after a crash", ref, c.Context)
	}
	if cpu.MilliValue() < 1 {
		return nil, fmt.Errorf("patch %s in context %s: cpu %s: must be at least 1m", ref, c.Context, cpu.String())
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	w, err := workloadFor(c, ref)
	if err != nil {
		return nil, err
	}
	p := &Patched{c: c, ref: ref, run: ledger.Run(), timeout: timeout}
	var recorded string
	err = retryConflict(func() error {
		obj, err := w.get(ctx)
		if err != nil {
			return err
		}
		if obj.problem != "" {
			return fmt.Errorf("%s in context %s: %s", w.what(), c.Context, obj.problem)
		}
		cur, path, err := obj.container(ref)
		if err != nil {
			return fmt.Errorf("%s in context %s: %w", w.what(), c.Context, err)
		}
		ann := obj.meta.Annotations
		orig := cur.Resources
		switch by := ann[AnnotationRun]; by {
		case "":
		case p.run:
			// Patched before by this run: the annotation keeps the first original.
			if err := json.Unmarshal([]byte(ann[AnnotationOriginal]), &orig); err != nil {
				return fmt.Errorf("%s in context %s: annotation %s: %w", w.what(), c.Context, AnnotationOriginal, err)
			}
		default:
			return fmt.Errorf("%s in context %s: already patched by run %s (annotation %s); `spanperf clean --kube` restores the patches of dead runs", w.what(), c.Context, by, AnnotationRun)
		}
		origJSON, err := json.Marshal(orig)
		if err != nil {
			return err
		}
		// Recorded before the patch is sent; again if a conflict showed
		// the object changed in between.
		if recorded != string(origJSON) {
			if err := ledger.Add(testbed.Entry{Kind: testbed.KindKubePatch, Kube: &testbed.KubePatch{
				Kubeconfig: ref.Kubeconfig, Context: c.Context, Kind: string(ref.Kind),
				Namespace: ref.Namespace, Name: ref.Name, Container: ref.Container, Original: origJSON,
			}}); err != nil {
				return fmt.Errorf("patch %s in context %s: record in ledger: %w", ref, c.Context, err)
			}
			recorded = string(origJSON)
		}
		res, note := withLimit(orig, cpu)
		p.original, p.note = orig, note
		ops := []jsonOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: obj.meta.ResourceVersion}}
		if ann == nil {
			ops = append(ops, jsonOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{}})
		}
		ops = append(ops,
			jsonOp{Op: "add", Path: annPath(AnnotationOriginal), Value: string(origJSON)},
			jsonOp{Op: "add", Path: annPath(AnnotationRun), Value: p.run},
			jsonOp{Op: "add", Path: path + "/resources", Value: res},
		)
		return w.patch(ctx, "patch", ops)
	})
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	if err := w.waitRollout(ctx, timeout); err != nil {
		err = fmt.Errorf("patch %s to cpu limit %s: %w", ref, cpu.String(), err)
		// Undo even when ctx was cancelled, within a bound of its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+30*time.Second)
		defer cancel()
		if rerr := p.Restore(rctx); rerr != nil {
			return nil, errors.Join(err, fmt.Errorf("undo the patch: %w", rerr))
		}
		return nil, fmt.Errorf("%w (the original resources are restored)", err)
	}
	return p, nil
}

// Restore puts the container's original resources back exactly (no limit
// if it had none), removes the annotations, and waits (at most the
// timeout given to Patch) until the rollout has finished. An object no
// longer patched by this run (restored already) is left as it is; one
// patched by another run is an error. The spec is restored even when the
// rollout then does not finish in time; the error says so.
//
// After ^C, give it a context that outlives the run's (for instance
// context.WithTimeout(context.WithoutCancel(ctx), ...)): with a cancelled
// context the object stays patched until `spanperf clean --kube`.
func (p *Patched) Restore(ctx context.Context) error {
	w, err := workloadFor(p.c, p.ref)
	if err != nil {
		return err
	}
	origJSON, err := json.Marshal(p.original)
	if err != nil {
		return err
	}
	changed, err := restore(ctx, w, p.run, origJSON)
	if err != nil || !changed {
		return err
	}
	if err := w.waitRollout(ctx, p.timeout); err != nil {
		return fmt.Errorf("restore %s: resources restored, but %w", p.ref, err)
	}
	return nil
}

// restore puts origJSON back as the container's resources and removes the
// annotations, if the object is still patched by run. It reports whether
// it changed the object; a missing object is not an error.
func restore(ctx context.Context, w *workload, run string, origJSON []byte) (bool, error) {
	changed := false
	err := retryConflict(func() error {
		obj, err := w.get(ctx)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		ann := obj.meta.Annotations
		switch by := ann[AnnotationRun]; by {
		case "":
			return nil
		case run:
		default:
			return fmt.Errorf("%s in context %s: patched by run %s, not %s; leaving it", w.what(), w.c.Context, by, run)
		}
		_, path, err := obj.container(w.ref)
		if err != nil {
			return fmt.Errorf("%s in context %s: %w", w.what(), w.c.Context, err)
		}
		ops := []jsonOp{
			{Op: "replace", Path: "/metadata/resourceVersion", Value: obj.meta.ResourceVersion},
			{Op: "replace", Path: path + "/resources", Value: json.RawMessage(origJSON)},
			{Op: "remove", Path: annPath(AnnotationRun)},
		}
		if _, ok := ann[AnnotationOriginal]; ok {
			ops = append(ops, jsonOp{Op: "remove", Path: annPath(AnnotationOriginal)})
		}
		if err := w.patch(ctx, "patch", ops); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	return changed, nil
}

// withLimit returns orig with limits.cpu set to cpu, and requests.cpu
// lowered to cpu if it was above it (and a note saying so).
func withLimit(orig corev1.ResourceRequirements, cpu resource.Quantity) (corev1.ResourceRequirements, string) {
	res := *orig.DeepCopy()
	if res.Limits == nil {
		res.Limits = corev1.ResourceList{}
	}
	res.Limits[corev1.ResourceCPU] = cpu
	note := ""
	if req, ok := res.Requests[corev1.ResourceCPU]; ok && req.Cmp(cpu) > 0 {
		res.Requests[corev1.ResourceCPU] = cpu
		note = fmt.Sprintf("requests.cpu %s was above the new limit: lowered to %s", req.String(), cpu.String())
	}
	return res, note
}

// jsonOp is one RFC 6902 operation.
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// annPath is the JSON pointer of an annotation ("/" escaped as "~1").
func annPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// retryConflict runs fn again (at most 5 times) while the object changed
// between read and patch (409 Conflict, from the resourceVersion the patch
// carries).
func retryConflict(fn func() error) error {
	var err error
	for i := 0; i < 5; i++ {
		if err = fn(); err == nil || !isConflict(err) {
			return err
		}
		time.Sleep(time.Duration(50*(i+1)) * time.Millisecond)
	}
	return err
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }

// containerPath finds name among the template's containers, then its init
// containers (native sidecars), and returns it with its JSON pointer.
func containerPath(spec *corev1.PodSpec, name string) (*corev1.Container, string, error) {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], "/spec/template/spec/containers/" + strconv.Itoa(i), nil
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i], "/spec/template/spec/initContainers/" + strconv.Itoa(i), nil
		}
	}
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	return nil, "", fmt.Errorf("no container %q (containers: %s)", name, strings.Join(names, ", "))
}
