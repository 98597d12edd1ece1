package nodeprobe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// probePod creates the node probe's DaemonSet in ns and waits up to a
// minute for its pod on the cluster's one node.
func probePod(t *testing.T, c cluster, ns string) *corev1.Pod {
	t.Helper()
	run := strings.TrimPrefix(ns, "spanperf-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds := kube.NodeProbeDaemonSet(ns, run, c.image, nil)
	if _, err := c.kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("context %s: create daemonset %s/%s: %v", c.context, ns, ds.Name, err)
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: kube.NodeProbeSelector(run)})
	var pod *corev1.Pod
	if err := waitFor(ctx, func() error {
		l, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		for i, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				pod = &l.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no running node probe pod of %s (%d pods)", sel, len(l.Items))
	}); err != nil {
		t.Fatalf("context %s: %v", c.context, err)
	}
	return pod
}

// Known answer (b) through the real DaemonSet, on both local clusters: a
// pod burns 0.3 cores in spk1 and 0.6 in spk2; each cluster's node probe
// pod (host PID, privileged) runs the probe by exec (Plan, Collect,
// Remote); Merge takes each
// burn from its node, at what its cgroup's CPU account charged ±10%, and,
// since the two nodes share this machine's kernel (one boot ID), counts
// that kernel's busy CPU once, with a warning; with each cluster's pods
// the run's in the other's spec, both burns are in the path's CPU.
func TestClusterDaemonSet(t *testing.T) {
	cs := clusters(t)
	if len(cs) < 2 {
		t.Skip("needs two clusters in SPANPERF_KUBE_CONTEXTS")
	}
	cs = cs[:2]
	burns := []float64{0.3, 0.6}
	type site struct {
		c           cluster
		ns          string
		burn, probe *corev1.Pod
	}
	sites := make([]*site, len(cs))
	for i, c := range cs {
		s := &site{c: c, ns: testNamespace(t, c)}
		s.burn = runningPod(t, c, s.ns, burnPod(c.image, burns[i]))
		s.probe = probePod(t, c, s.ns)
		sites[i] = s
	}
	var comps []results.Component
	for i, s := range sites {
		comps = append(comps, results.Component{Name: fmt.Sprintf("burn@%s", s.c.context), Context: s.c.context, Namespace: s.ns,
			Pod: s.burn.Name, Container: "burn", Node: s.burn.Spec.NodeName, PodUID: string(s.burn.UID)})
		t.Logf("%s: burn %.1f cores in %s/%s on %s; probe pod %s", s.c.context, burns[i], s.ns, s.burn.Name, s.burn.Spec.NodeName, s.probe.Name)
	}
	// Each cluster's specs, with the other cluster's pods as the run's too
	// (the clusters share this machine).
	specs := make([]map[string]nodeprobe.Spec, len(sites))
	for i, s := range sites {
		base := nodeprobe.Spec{Delay: nodeprobe.Duration(300 * time.Millisecond), Window: nodeprobe.Duration(4 * time.Second)}
		for j, o := range sites {
			if j != i {
				base.RunPods = append(base.RunPods, string(o.burn.UID), string(o.probe.UID))
			}
		}
		var err error
		if specs[i], err = nodeprobe.Plan(base, comps[i:i+1], []corev1.Pod{*s.burn, *s.probe}); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(specs[i])
		t.Logf("%s specs: %s", s.c.context, b)
	}
	for attempt := 1; ; attempt++ {
		nodes := make([]nodeprobe.Result, len(sites))
		acct := make([]float64, len(sites))
		var wg sync.WaitGroup
		for i, s := range sites {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := nodeprobe.ContainerID(s.burn.Status.ContainerStatuses[0].ContainerID)
				c0, t0 := cgroupCPU(t, string(s.burn.UID), id), time.Now()
				rs := nodeprobe.Collect(context.Background(), s.c.clients.Exec, s.c.context, s.ns, kube.NodeProbeName,
					map[string]string{s.probe.Spec.NodeName: s.probe.Name}, specs[i])
				acct[i] = (cgroupCPU(t, string(s.burn.UID), id) - c0).Seconds() / time.Since(t0).Seconds()
				if len(rs) != 1 {
					t.Errorf("%s: %d results, want 1 (one node)", s.c.context, len(rs))
					return
				}
				nodes[i] = rs[0]
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		m := nodeprobe.Merge(nodes, comps)
		var fail []string
		for i, r := range nodes {
			if r.Error != "" {
				t.Fatalf("%s: %s", sites[i].c.context, r.Error)
			}
			got := m.Metrics[results.For(results.CPUCores, comps[i].Name)]
			t.Logf("attempt %d: %s node %s boot %s: burn %.3f by its cgroup, %.3f by the node probe; node busy %.3f softirq %.3f foreign %.3f",
				attempt, sites[i].c.context, r.Node, r.BootID, acct[i], got, r.Metrics[results.CPUCoresBusy], r.Metrics[results.CPUCoresSoftirq], r.Metrics[results.CPUCoresForeign])
			if math.Abs(got-acct[i]) > 0.1*acct[i] || math.Abs(got-burns[i]) > 0.2*burns[i] {
				fail = append(fail, fmt.Sprintf("%s: burn measured %.3f, its cgroup %.3f, injected %.1f: want ±10%% and ±20%%", comps[i].Name, got, acct[i], burns[i]))
			}
			if r.Node != sites[i].probe.Spec.NodeName {
				fail = append(fail, fmt.Sprintf("%s: node %q, want %q (from the downward API)", sites[i].c.context, r.Node, sites[i].probe.Spec.NodeName))
			}
		}
		t.Logf("merged: busy %.3f path %.3f datapath %.3f; warnings %q", m.Metrics[results.CPUCoresBusy], m.Metrics[results.CPUCoresPath], m.Metrics[results.CPUCoresDatapath], m.Warnings)
		// Both burns are the run's on the one kernel: in the path.
		if path := m.Metrics[results.CPUCoresPath]; path < 0.9*(acct[0]+acct[1]) {
			fail = append(fail, fmt.Sprintf("path %.3f cores, want at least both burns' %.3f −10%%", path, acct[0]+acct[1]))
		}
		if nodes[0].BootID == "" || nodes[0].BootID != nodes[1].BootID {
			fail = append(fail, fmt.Sprintf("boot IDs %q and %q: want one (one machine)", nodes[0].BootID, nodes[1].BootID))
		} else {
			first := nodes[0]
			if nodes[1].Node < first.Node {
				first = nodes[1]
			}
			if m.Metrics[results.CPUCoresBusy] != first.Metrics[results.CPUCoresBusy] || len(m.Warnings) != 1 {
				fail = append(fail, fmt.Sprintf("busy %.3f, want %s's %.3f once; warnings %q", m.Metrics[results.CPUCoresBusy], first.Node, first.Metrics[results.CPUCoresBusy], m.Warnings))
			}
		}
		if len(fail) == 0 {
			return
		}
		if attempt == 2 {
			t.Fatal(strings.Join(fail, "; "))
		}
		t.Logf("attempt %d: %s; once more", attempt, strings.Join(fail, "; "))
	}
}
