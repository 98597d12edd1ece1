package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// ConnectTimeout bounds the first answer of each cluster's API server.
const ConnectTimeout = 15 * time.Second

// KubeSpec is the Kubernetes testbed scenario s asks for, for run id.
func KubeSpec(s *scenario.Scenario, id string) kube.Spec {
	spec := kube.Spec{Run: id, Image: s.Kube.Image, ShareNode: s.Kube.ShareNode}
	for _, st := range s.SiteList {
		ks := kube.SiteSpec{Name: st.Name, Context: st.Context, Kubeconfig: st.Kubeconfig, NodeSelector: st.NodeSelector}
		for _, t := range st.Tolerations {
			ks.Tolerations = append(ks.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
				Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
		spec.Sites = append(spec.Sites, ks)
	}
	return spec
}

// errNoImage is the error of a run on Kubernetes sites without an agent image.
var errNoImage = errors.New("no agent image: build it with `spanperf image -o spanperf.tar --push REGISTRY/spanperf:TAG` (or `make image`) and name it with image: in the scenario or --image")

// newKubeTestbed connects to the clusters of s's sites, runs dp's
// preflight against them before anything is created, and creates the
// run's namespaces and agent pods shaped as dp asks.
func newKubeTestbed(ctx context.Context, s *scenario.Scenario, id string, dp datapath.Datapath) (*kube.Testbed, error) {
	spec := KubeSpec(s, id)
	if spec.Image == "" {
		return nil, errNoImage
	}
	clients := make([]*kube.Clients, len(spec.Sites))
	byCluster := map[[2]string]*kube.Clients{}
	for i, st := range spec.Sites {
		key := [2]string{st.Kubeconfig, st.Context}
		if c, ok := byCluster[key]; ok {
			clients[i] = c
			continue
		}
		c, err := kube.Connect(ctx, st, ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", st.Name, err)
		}
		byCluster[key], clients[i] = c, c
	}
	if pf, ok := dp.(kube.Preflighter); ok {
		if err := pf.Preflight(ctx, spec.Sites, clients); err != nil {
			return nil, fmt.Errorf("preflight: %w", err)
		}
	}
	if sh, ok := dp.(kube.Shaper); ok {
		sh.Shape(&spec.Shape)
	}
	return kube.New(ctx, spec)
}
