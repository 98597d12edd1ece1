package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kpatch"
	"github.com/spanperf/spanperf/internal/workload"
)

// kubeSizing applies the trials' CPU limits on Kubernetes sites: a limit
// on a pod component patches the CPU limit of the Deployment, DaemonSet
// or StatefulSet that runs it (kpatch, recorded in the group's ledger so
// that `spanperf clean --kube` restores it after a crash), only when the
// value changes, and the link's components are found again after the
// rollout. close restores every object patched.
type kubeSizing struct {
	tb     *kube.Testbed
	link   *datapath.Link
	ledger *testbed.Ledger
	allow  bool
	// patched holds the first patch of each object, whose original close
	// restores; at holds the limit in effect, in millicores.
	patched map[kpatch.Ref]*kpatch.Patched
	at      map[kpatch.Ref]int64
	// timeout bounds each rollout; 0 is kpatch.DefaultTimeout.
	timeout time.Duration
}

func newKubeSizing(tb *kube.Testbed, link *datapath.Link, allow bool) *kubeSizing {
	return &kubeSizing{tb: tb, link: link, ledger: tb.Ledger(), allow: allow,
		patched: map[kpatch.Ref]*kpatch.Patched{}, at: map[kpatch.Ref]int64{}}
}

// hasLimits tells whether any of trials carries a CPU limit.
func hasLimits(trials []Trial) bool {
	for _, t := range trials {
		for p := range t.Point.Params {
			if _, ok := results.ParseCPULimitParam(p); ok {
				return true
			}
		}
	}
	return false
}

// site finds the site of the cluster a component runs in.
func (k *kubeSizing) site(comp results.Component) (*kube.Site, error) {
	for _, s := range k.tb.KubeSites() {
		if s.Clients() != nil && s.Clients().Context == comp.Context {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s: no site in context %q", comp.Name, comp.Context)
}

// refOf finds the workload object and container that run component comp.
// A component without a container names the pod's only container.
func (k *kubeSizing) refOf(ctx context.Context, comp results.Component) (kpatch.Ref, *kube.Site, error) {
	s, err := k.site(comp)
	if err != nil {
		return kpatch.Ref{}, nil, err
	}
	cl := s.Clients()
	container := comp.Container
	if container == "" {
		p, err := cl.Kube.CoreV1().Pods(comp.Namespace).Get(ctx, comp.Pod, metav1.GetOptions{})
		if err != nil {
			return kpatch.Ref{}, nil, fmt.Errorf("%s: get pod %s/%s in context %s: %w", comp.Name, comp.Namespace, comp.Pod, cl.Context, err)
		}
		if len(p.Spec.Containers) != 1 {
			return kpatch.Ref{}, nil, fmt.Errorf("%s: pod %s/%s in context %s has %d containers: name the one to size (container:)", comp.Name, comp.Namespace, comp.Pod, cl.Context, len(p.Spec.Containers))
		}
		container = p.Spec.Containers[0].Name
	}
	ref, err := kpatch.RefForPod(ctx, cl, comp.Namespace, comp.Pod, container)
	if err != nil {
		return kpatch.Ref{}, nil, fmt.Errorf("%s: %w", comp.Name, err)
	}
	ref.Kubeconfig = s.Spec().Kubeconfig
	return ref, s, nil
}

// apply brings the cluster to the limits of params: it patches each
// object whose limit changes and restores those no longer limited, then
// refreshes the link's components. It returns the limit of each limited
// component, in cores, and the notes of the patches (what changed besides
// limits.cpu).
func (k *kubeSizing) apply(ctx context.Context, params results.Params) (map[string]float64, []string, error) {
	lim, err := limitsOf(k.link.Components, params, "pod", func(c results.Component) bool { return c.Pod != "" })
	if err != nil {
		return nil, nil, err
	}
	type want struct {
		key   string
		milli int64
		site  *kube.Site
	}
	wants := map[kpatch.Ref]want{}
	for _, name := range slices.Sorted(maps.Keys(lim)) {
		i := slices.IndexFunc(k.link.Components, func(c results.Component) bool { return c.Name == name })
		comp := k.link.Components[i]
		ref, s, err := k.refOf(ctx, comp)
		if err != nil {
			return nil, nil, fmt.Errorf("size %w", err)
		}
		q, err := kpatch.ParseCPU(lim[name])
		if err != nil {
			return nil, nil, fmt.Errorf("size %s: %w", name, err)
		}
		if w, ok := wants[ref]; ok && w.milli != q.MilliValue() {
			return nil, nil, fmt.Errorf("size %s: %s is also limited to %dm through %s", name, ref, w.milli, w.key)
		}
		wants[ref] = want{key: name, milli: q.MilliValue(), site: s}
	}
	var notes []string
	changed := false
	for _, ref := range slices.SortedFunc(maps.Keys(wants), cmpRef) {
		w := wants[ref]
		if cur, ok := k.at[ref]; ok && cur == w.milli {
			continue
		}
		if err := kpatch.Allowed(k.allow, w.key, ref, w.site.Clients().Context); err != nil {
			return nil, nil, err
		}
		q, _ := kpatch.ParseCPU(float64(w.milli) / 1000)
		p, err := kpatch.Patch(ctx, w.site.Clients(), ref, q, k.ledger, k.timeout)
		changed = true
		if err != nil {
			delete(k.at, ref)
			return nil, nil, errors.Join(err, k.refresh(ctx))
		}
		if _, ok := k.patched[ref]; !ok {
			k.patched[ref] = p
		}
		k.at[ref] = w.milli
		if n := p.Note(); n != "" {
			notes = append(notes, fmt.Sprintf("%s in context %s: %s", ref, w.site.Clients().Context, n))
		}
	}
	for _, ref := range slices.SortedFunc(maps.Keys(k.at), cmpRef) {
		if _, ok := wants[ref]; ok {
			continue
		}
		changed = true
		err := k.patched[ref].Restore(ctx)
		delete(k.at, ref)
		delete(k.patched, ref)
		if err != nil {
			return nil, nil, errors.Join(err, k.refresh(ctx))
		}
	}
	if changed {
		if err := k.refresh(ctx); err != nil {
			return nil, nil, err
		}
	}
	return lim, notes, nil
}

// refresh finds the link's components again (their pods are new after a
// rollout).
func (k *kubeSizing) refresh(ctx context.Context) error {
	if k.link.Refresh == nil {
		return nil
	}
	if err := k.link.Refresh(ctx); err != nil {
		return fmt.Errorf("find the components after the rollout: %w", err)
	}
	return nil
}

func cmpRef(a, b kpatch.Ref) int { return strings.Compare(a.String(), b.String()) }

// run runs one trial (run) under its limits and adds to its record the
// limit of each component (results.CPULimitCores) and the patches' notes
// (as warnings). A trial whose limits cannot be applied is not run.
func (k *kubeSizing) run(ctx context.Context, o Options, t Trial, run func(measure workload.MeasureFunc) results.Record) results.Record {
	lim, notes, err := k.apply(ctx, t.Point.Params)
	if err != nil {
		rec := newRecord(o, t, time.Now())
		rec.Components = k.link.Components
		rec.End, rec.Error = time.Now(), err.Error()
		return rec
	}
	rec := run(func(time.Duration, time.Duration) {})
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	for name, cores := range lim {
		rec.Metrics[results.For(results.CPULimitCores, name)] = cores
	}
	rec.Warnings = append(rec.Warnings, notes...)
	return rec
}

// close restores every object patched, and finds the components again,
// within a bound of its own even when ctx has ended (^C): an object left
// patched stays so until `spanperf clean --kube`.
func (k *kubeSizing) close(ctx context.Context) error {
	if len(k.patched) == 0 {
		return nil
	}
	timeout := k.timeout
	if timeout <= 0 {
		timeout = kpatch.DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+30*time.Second)
	defer cancel()
	var errs []error
	for _, ref := range slices.SortedFunc(maps.Keys(k.patched), cmpRef) {
		if err := k.patched[ref].Restore(rctx); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", ref, err))
		}
		delete(k.patched, ref)
		delete(k.at, ref)
	}
	return errors.Join(errs...)
}
