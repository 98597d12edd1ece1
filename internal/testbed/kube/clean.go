package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/testbed"
)

// CleanOptions say which runs' namespaces Clean removes.
type CleanOptions struct {
	// Run, when set, also removes that run's namespaces whoever owns
	// them (a run from another host, or one still running: the caller
	// asked for it by name).
	Run string
	// RunPrefix, when set, limits Clean to runs whose ID starts with it;
	// others are not even reported (tests keep to their own runs so).
	RunPrefix string
}

// CleanedNamespace is one run namespace Clean found, and what it did.
type CleanedNamespace struct {
	// Context is the cluster's kubeconfig context.
	Context string
	// Namespace is the namespace, spanperf-<Run>.
	Namespace string
	// Run is the run ID (the namespace's spanperf.io/run label).
	Run string
	// Reason says why it was removed or left.
	Reason string
}

// String is "context C: namespace N (run R): REASON".
func (c CleanedNamespace) String() string {
	return fmt.Sprintf("context %s: namespace %s (run %s): %s", c.Context, c.Namespace, c.Run, c.Reason)
}

// CleanReport says what Clean found: what it removed and what it left, and why.
type CleanReport struct {
	Removed []CleanedNamespace
	Left    []CleanedNamespace
}

// Clean lists the namespaces labelled spanperf.io/run in each cluster and
// removes those of dead runs: owned by a controller on this host that is
// no longer running (its PID is gone or now another process's), or named
// by opts.Run. It leaves the others (a live run, a run from another host,
// a namespace without an owner) and says why, waits until the removed
// ones are gone, and touches nothing else: only a namespace whose name is
// spanperf-<its run label>.
func Clean(ctx context.Context, clusters []*Clients, opts CleanOptions) (CleanReport, error) {
	var rep CleanReport
	host, err := os.Hostname()
	if err != nil {
		return rep, fmt.Errorf("clean: %w", err)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range clusters {
		list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelRun})
		if err != nil {
			errs = append(errs, c.apiError("list", "namespaces", "", err))
			continue
		}
		for _, ns := range list.Items {
			run := ns.Labels[LabelRun]
			if ns.Name != Namespace(run) || (opts.RunPrefix != "" && !strings.HasPrefix(run, opts.RunPrefix)) {
				continue
			}
			cn := CleanedNamespace{Context: c.Context, Namespace: ns.Name, Run: run}
			remove := false
			cn.Reason, remove = verdict(ns.Annotations, host)
			if run == opts.Run && opts.Run != "" {
				remove = true
				cn.Reason = "named by --run (" + cn.Reason + ")"
			}
			if !remove {
				rep.Left = append(rep.Left, cn)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := deleteNamespace(ctx, c, cn.Namespace)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("clean: %w", err))
					return
				}
				rep.Removed = append(rep.Removed, cn)
			}()
		}
	}
	wg.Wait()
	return rep, errors.Join(errs...)
}

// verdict says whether the run whose namespace carries annotations is
// dead, seen from host, and why.
func verdict(a map[string]string, host string) (reason string, dead bool) {
	owner, pidS, startS := a[AnnotationOwnerHost], a[AnnotationOwnerPID], a[AnnotationOwnerStart]
	if owner == "" || pidS == "" {
		return "no owner annotations: left", false
	}
	if owner != host {
		return fmt.Sprintf("owned by host %s, not this one (%s): left", owner, host), false
	}
	pid, err := strconv.Atoi(pidS)
	if err != nil || pid <= 0 {
		return fmt.Sprintf("bad owner pid %q: left", pidS), false
	}
	start, err := strconv.ParseUint(startS, 10, 64)
	if err != nil {
		return fmt.Sprintf("bad owner start %q: left", startS), false
	}
	if testbed.Alive(pid, start) {
		return fmt.Sprintf("live: owner pid %d is running", pid), false
	}
	return fmt.Sprintf("dead: owner pid %d on this host has exited", pid), true
}
