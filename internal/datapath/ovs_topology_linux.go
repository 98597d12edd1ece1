package datapath

import "github.com/spanperf/spanperf/internal/testbed"

var _ TopologyLister = (*OVS)(nil)

// Topologies: the mesh only. The switches are wired point to point
// (MaxSites is 2), and two sites are a mesh; the gateway topology is
// CheckGateway's.
func (d *OVS) Topologies() []string { return []string{testbed.TopologyMesh} }
