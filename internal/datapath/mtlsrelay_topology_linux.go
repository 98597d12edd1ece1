package datapath

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// MTLSRelayTransitBasePort + j is where an mtls-relay relay that forwards
// for other sites (the hub; a site in the middle of a chain) accepts
// mutual TLS from the relay before it for the service in site j, and
// carries it on to the next relay toward j: one port per destination,
// because the destination cannot be read from a connection once TLS is
// terminated, and the relays re-originate TLS at each hop, as Skupper's
// interior routers do.
const MTLSRelayTransitBasePort = MTLSRelayPort + 1

var _ TopologyLister = (*MTLSRelay)(nil)

// Topologies: the relays build the mesh, the hub (spoke-to-spoke through
// the first site's relay) and the chain (through every relay between).
func (r *MTLSRelay) Topologies() []string {
	return []string{testbed.TopologyMesh, testbed.TopologyHub, testbed.TopologyChain}
}

// mtlsNextHop is where site i's relay sends, over mutual TLS, a connection
// for the service in site j in topology: the next relay toward j, on
// MTLSRelayPort when that relay is j's own, else on its transit port for j.
func mtlsNextHop(topology string, sites []*netns.Site, i, j int) (*netns.Site, netip.AddrPort) {
	h := nextHop(topology, len(sites), i, j)
	port := uint16(MTLSRelayPort)
	if h != j {
		port = uint16(MTLSRelayTransitBasePort + j)
	}
	return sites[h], netip.AddrPortFrom(sites[h].Addr(), port)
}

// mtlsTransitListen is what site i's relay listens on to forward for
// other sites in topology: one transit port per destination.
func mtlsTransitListen(topology string, sites []*netns.Site, i int) []netip.AddrPort {
	var out []netip.AddrPort
	via := transits(topology, len(sites))[i]
	for j := range sites {
		if via[j] {
			out = append(out, netip.AddrPortFrom(sites[i].Addr(), uint16(MTLSRelayTransitBasePort+j)))
		}
	}
	return out
}

// mtlsTransitConfig is the part of site i's relay config that forwards for
// other sites: for each destination j it carries, a frontend that accepts
// mutual TLS on the transit port and hands the connection to backend
// to-<j>, the one its own clients of j use, toward the next relay.
func (r *MTLSRelay) mtlsTransitConfig(topology string, sites []*netns.Site, i int, crt, ca string) string {
	var b strings.Builder
	for _, ap := range mtlsTransitListen(topology, sites, i) {
		j := int(ap.Port()) - MTLSRelayTransitBasePort
		fmt.Fprintf(&b, `
# Mutual TLS from a relay before this one, for the service in site %[1]s:
# forwarded to the next relay toward it.
frontend via-%[1]s
    bind %[2]s ssl crt %[3]s ca-file %[4]s verify required %[5]s
    default_backend to-%[1]s
`, sites[j].Name(), ap, crt, ca, r.tlsOptions())
	}
	return b.String()
}
