package nodeprobe

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/results"
)

// Plan returns the Spec of each node of one cluster for one trial: base
// (delay, window, interval, energy, and RunPods: the UIDs of the run's
// pods in the other clusters, which matter where clusters share a
// machine) with the components on that node, and every pod's UID added to
// RunPods. pods are the run's pods in that cluster
// (agents, node probes) and the components' pods, as they are now (their
// node and container statuses); every node one of them runs on gets a
// Spec, with or without components, since its busy CPU is part of the
// path. comps are the cluster's pod components (PodUID set): each is
// placed on its pod's node, a container component by the ID the pod's
// status gives its container. A component whose pod or container is not
// found is an error naming it.
func Plan(base Spec, comps []results.Component, pods []corev1.Pod) (map[string]Spec, error) {
	byUID := map[string]*corev1.Pod{}
	specs := map[string]Spec{}
	uids := slices.Clone(base.RunPods)
	for i := range pods {
		p := &pods[i]
		byUID[string(p.UID)] = p
		uids = append(uids, string(p.UID))
	}
	sort.Strings(uids)
	uids = slices.Compact(uids)
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue // not scheduled: runs nowhere
		}
		if _, ok := specs[p.Spec.NodeName]; !ok {
			s := base
			s.Node, s.Components, s.RunPods = p.Spec.NodeName, nil, slices.Clone(uids)
			specs[p.Spec.NodeName] = s
		}
	}
	for _, c := range comps {
		p := byUID[c.PodUID]
		if p == nil {
			return nil, fmt.Errorf("nodeprobe: component %s: pod %s/%s (uid %s) is not among the run's pods", c.Name, c.Namespace, c.Pod, c.PodUID)
		}
		node := p.Spec.NodeName
		if node == "" {
			return nil, fmt.Errorf("nodeprobe: component %s: pod %s/%s is on no node", c.Name, p.Namespace, p.Name)
		}
		nc := Component{Name: c.Name, PodUID: c.PodUID, Container: c.Container}
		if c.Container != "" {
			i := slices.IndexFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Container })
			if i < 0 || p.Status.ContainerStatuses[i].ContainerID == "" {
				return nil, fmt.Errorf("nodeprobe: component %s: pod %s/%s has no started container %s", c.Name, p.Namespace, p.Name, c.Container)
			}
			nc.ContainerID = p.Status.ContainerStatuses[i].ContainerID
		}
		s := specs[node]
		s.Components = append(s.Components, nc)
		specs[node] = s
	}
	for node, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
	}
	return specs, nil
}

// Collect runs each node's Spec in parallel by exec in that node's probe
// pod (probes: node → pod name, in namespace ns, container container) of
// the cluster of kubeconfig context kctx, and returns the Results, in
// node name order, with Context set; a node without a probe pod gets a
// Result saying so.
func Collect(ctx context.Context, exec ExecFunc, kctx, ns, container string, probes map[string]string, specs map[string]Spec) []Result {
	nodes := make([]string, 0, len(specs))
	for n := range specs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make([]Result, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		pod, ok := probes[n]
		if !ok {
			out[i] = Result{Node: n, Context: kctx, Error: fmt.Sprintf("context %s: no node probe pod on node %s in namespace %s", kctx, n, ns)}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = Remote(ctx, exec, ns, pod, container, n, specs[n])
			out[i].Context = kctx
		}()
	}
	wg.Wait()
	return out
}
