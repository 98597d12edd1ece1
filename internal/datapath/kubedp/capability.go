package kubedp

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/scenario"
)

// switchDelayField is the option of the baselines that serve failover.
var switchDelayField = scenario.Field{Name: "switch_delay", Kind: scenario.KindDuration, Default: time.Duration(0),
	Doc: "failover: wait this long more before moving the client's EndpointSlice to the surviving server (a known answer)"}

var (
	_ datapath.Exposer     = Pod{}
	_ datapath.Redundancer = Pod{}
	_ datapath.Exposer     = (*Service)(nil)
	_ datapath.Redundancer = (*Service)(nil)
	_ datapath.Exposer     = HostNet{}
	_ datapath.Exposer     = (*Skupper)(nil)
	_ datapath.Exposer     = (*Submariner)(nil)
	_ datapath.Exposer     = (*Istio)(nil)
	_ datapath.Exposer     = (*Cilium)(nil)
	_ datapath.Exposer     = (*Linkerd)(nil)
	_ datapath.Exposer     = (*Custom)(nil)
)

// CanExpose: discovery creates a server pod and a headless Service, and
// the client dials the pod's IP (Serve).
func (Pod) CanExpose(string) error { return nil }

// CanRouteRedundant: failover's client dials a Service without selector
// in its cluster whose EndpointSlice holds the preferred server's pod IP
// (Serve).
func (Pod) CanRouteRedundant(string) error { return nil }

// CanExpose: only NodePort serves discovery (a server pod and a NodePort
// Service; the client dials a node's IP and the nodePort).
func (s *Service) CanExpose(string) error {
	if s.Type != corev1.ServiceTypeNodePort {
		return fmt.Errorf("a new server and its %s Service after setup is built for NodePort only (use k8s-nodeport or k8s-pod)", s.Type)
	}
	return nil
}

// CanRouteRedundant: only NodePort serves failover (a Service without
// selector in the client's cluster pointing at a node's IP and the
// nodePort of the preferred server's cluster).
func (s *Service) CanRouteRedundant(string) error { return s.CanExpose("") }

// CanExpose refuses: a new host-network server pod per exposure is not
// built (its port would be taken on the node).
func (HostNet) CanExpose(string) error {
	return errors.New("a new host-network server pod per exposure is not built (use k8s-pod or k8s-nodeport)")
}

// errSolutionServe is why the solution adapters leave discovery and
// failover out: their controllers cannot be installed on the local
// clusters, so creating a server and its export after setup is not built
// against them; the objects it would create are those of Setup, whose
// golden files cover them.
var errSolutionServe = errors.New("creating a server and its export after setup is built for the baselines only (the solution's export objects are covered by golden files; its controller is not installable on the local clusters)")

// CanExpose refuses (errSolutionServe).
func (*Skupper) CanExpose(string) error { return errSolutionServe }

// CanExpose refuses (errSolutionServe).
func (*Submariner) CanExpose(string) error { return errSolutionServe }

// CanExpose refuses (errSolutionServe).
func (*Istio) CanExpose(string) error { return errSolutionServe }

// CanExpose refuses (errSolutionServe).
func (*Cilium) CanExpose(string) error { return errSolutionServe }

// CanExpose refuses (errSolutionServe).
func (*Linkerd) CanExpose(string) error { return errSolutionServe }

// CanExpose refuses: a custom Kubernetes datapath describes its target
// and components, not how to export a new server.
func (*Custom) CanExpose(string) error {
	return errors.New("a custom Kubernetes datapath has no way to export a new server after setup")
}
