package datapath

import (
	"fmt"

	"github.com/spanperf/spanperf/internal/testbed"
)

var _ TopologyLister = (*WireGuard)(nil)

// Topologies: the mesh, the hub (spokes peer with the first site only, and
// their allowed IPs for it cover the other spokes) and the chain (each
// site peers with its neighbours).
func (w *WireGuard) Topologies() []string {
	return []string{testbed.TopologyMesh, testbed.TopologyHub, testbed.TopologyChain}
}

// wgForward lets ws's site forward between its peers: IPv4 forwarding on,
// and no ICMP redirects, since a packet forwarded between two peers leaves
// by the device it came in on and the kernel would otherwise tell the
// sender to go direct, which it cannot.
func wgForward(ws *wgSite) error {
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv4.conf.all.send_redirects", "0"},
		{"net.ipv4.conf." + ws.ifname + ".send_redirects", "0"},
	} {
		if err := ws.site.SetSysctl(kv[0], kv[1]); err != nil {
			return fmt.Errorf("wireguard: forwarding: %w", err)
		}
	}
	return nil
}
