package kpatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// ConnectFunc makes the clients of a kubeconfig file ("" is the default
// loading rules) and context, as a ledger entry records them.
type ConnectFunc func(kubeconfig, context string) (*kube.Clients, error)

// RestoreFromLedger restores every kube-patch entry of a run's ledger
// (ents as testbed.ReadLedger returns them; the first line names the run):
// the container's original resources back, the annotations removed, the
// rollout waited for (at most DefaultTimeout each, and ctx). It is
// idempotent: an object no longer patched by the run (restored, never
// patched, or re-applied) or deleted is left as it is. It returns one line
// per object restored, and the errors of those it could not restore; a
// connection is made once per kubeconfig and context.
func RestoreFromLedger(ctx context.Context, ents []testbed.Entry, connect ConnectFunc) ([]string, error) {
	run := ""
	if len(ents) > 0 {
		run = ents[0].Run
	}
	type cluster struct{ kubeconfig, context string }
	clients := map[cluster]*kube.Clients{}
	failed := map[cluster]error{}
	var done []string
	var errs []error
	// Newest first: a re-patch by the same run records the same original,
	// so order matters only for objects patched by two entries, which
	// agree; the first restore makes the later ones no-ops.
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		if e.Kind != testbed.KindKubePatch || e.Kube == nil {
			continue
		}
		k := e.Kube
		ref := Ref{Kind: Kind(k.Kind), Namespace: k.Namespace, Name: k.Name, Container: k.Container, Kubeconfig: k.Kubeconfig}
		cl := cluster{k.Kubeconfig, k.Context}
		if err := failed[cl]; err != nil {
			continue
		}
		c := clients[cl]
		if c == nil {
			var err error
			if c, err = connect(k.Kubeconfig, k.Context); err != nil {
				err = fmt.Errorf("run %s: connect to context %s (kubeconfig %q) to restore %s: %w", run, k.Context, k.Kubeconfig, ref, err)
				failed[cl] = err
				errs = append(errs, err)
				continue
			}
			clients[cl] = c
		}
		w, err := workloadFor(c, ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", run, err))
			continue
		}
		changed, err := restore(ctx, w, run, k.Original)
		if err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", run, err))
			continue
		}
		if !changed {
			continue
		}
		if err := w.waitRollout(ctx, DefaultTimeout); err != nil {
			errs = append(errs, fmt.Errorf("run %s: restore %s: resources restored, but %w", run, ref, err))
			continue
		}
		done = append(done, fmt.Sprintf("run %s: restored %s in context %s", run, ref, k.Context))
	}
	return done, errors.Join(errs...)
}

// CleanOptions chooses which ledgers Clean sweeps.
type CleanOptions struct {
	// Run, when set, limits the sweep to that run ID.
	Run string
	// Detached also sweeps runs left up on purpose by `spanperf up`.
	Detached bool
}

// CleanReport says what Clean restored and what it left.
type CleanReport struct {
	Restored []string // one line per object restored, and ledgers removed
	Skipped  []string // what was left, and why
}

// Clean restores the kube-patch entries of every dead run's ledger in
// testbed.LedgerDir (a run whose owner process is gone; with Detached,
// also runs left up by `spanperf up`): it is `spanperf clean --kube`'s
// part for patched objects. A ledger whose entries are all undone (only
// its first line and kube-patch entries left, all restored) is removed;
// one that still lists local things (netns, cgroups, paths) is rewritten
// without the restored entries, for `spanperf clean`.
func Clean(ctx context.Context, opts CleanOptions, connect ConnectFunc) (CleanReport, error) {
	var rep CleanReport
	var errs []error
	ledgers, _ := filepath.Glob(filepath.Join(testbed.LedgerDir, "*.ledger"))
	for _, lp := range ledgers {
		run := strings.TrimSuffix(filepath.Base(lp), ".ledger")
		if opts.Run != "" && run != opts.Run {
			continue
		}
		ents, err := testbed.ReadLedger(lp)
		if err != nil || len(ents) == 0 {
			continue
		}
		head := ents[0]
		var patches, rest []testbed.Entry
		for _, e := range ents[1:] {
			if e.Kind == testbed.KindKubePatch {
				patches = append(patches, e)
			} else {
				rest = append(rest, e)
			}
		}
		if len(patches) == 0 {
			continue
		}
		if head.Owner != 0 && testbed.Alive(head.Owner, head.OwnerStart) {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: still running (pid %d)", run, head.Owner))
			continue
		}
		if head.Owner == 0 && !opts.Detached {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: left up by `spanperf up`; `spanperf down` removes it", run))
			continue
		}
		done, err := RestoreFromLedger(ctx, ents, connect)
		rep.Restored = append(rep.Restored, done...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(rest) == 0 {
			if err := os.Remove(lp); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("run %s: %w", run, err))
				continue
			}
			rep.Restored = append(rep.Restored, "ledger "+lp)
			continue
		}
		if err := testbed.RewriteLedger(lp, append([]testbed.Entry{head}, rest...)); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", run, err))
			continue
		}
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: its ledger still lists local things; `spanperf clean` removes them", run))
	}
	return rep, errors.Join(errs...)
}
