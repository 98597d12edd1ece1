package datapath

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var _ TopologyLister = (*MeshGateway)(nil)

// Topologies: the mesh, the hub and the chain. A proxy sends to the
// east-west gateway of the next site toward the destination; a gateway
// that is not the destination's routes by the inner TLS's SNI, still
// encrypted end to end between the proxies, to the next gateway (Istio's
// gateways between networks pass TLS through by SNI the same way). With
// Double, each gateway terminates the outer layer and the one forwarding
// wraps the stream in a new outer layer to the next.
func (m *MeshGateway) Topologies() []string {
	return []string{testbed.TopologyMesh, testbed.TopologyHub, testbed.TopologyChain}
}

// meshNextGateway is the site whose east-west gateway site i's proxy, or
// gateway, hands a connection for site j to in topology, and the address.
func meshNextGateway(topology string, sites []*netns.Site, i, j int) (*netns.Site, netip.AddrPort) {
	h := sites[nextHop(topology, len(sites), i, j)]
	return h, netip.AddrPortFrom(h.Addr(), MeshGatewayPort)
}

// meshTransit is what site i's gateway adds to forward for other sites in
// topology: use_backend rules for its eastwest frontend, and their
// backends toward the next gateway.
func (m *MeshGateway) meshTransit(topology string, sites []*netns.Site, i int, dir string) (rules, backends string) {
	var r, b strings.Builder
	via := transits(topology, len(sites))[i]
	for j, dst := range sites {
		if !via[j] {
			continue
		}
		next, addr := meshNextGateway(topology, sites, i, j)
		fmt.Fprintf(&r, "    use_backend via-%s if { req_ssl_sni -i %s }\n", dst.Name(), MeshSNI(dst.Name()))
		outer := ""
		if m.Double {
			outer = fmt.Sprintf(" ssl crt %s ca-file %s verify required verifyhost %[3]s sni str(%[3]s) %s",
				filepath.Join(dir, GatewayCertName(sites[i].Name())+".pem"), filepath.Join(dir, "ca.pem"),
				GatewayCertName(next.Name()), meshTLS)
		}
		fmt.Fprintf(&b, `
# Connections for the service in site %s: on to the next gateway toward it.
backend via-%[1]s
    server gateway %[2]s%[3]s
`, dst.Name(), addr, outer)
	}
	return r.String(), b.String()
}
