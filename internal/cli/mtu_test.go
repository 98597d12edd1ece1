package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestWANMTUSweep: wan.mtu [1500, 9000] builds a testbed per MTU. A custom
// datapath writes the MTU of each site's underlay link (eth0) as it comes
// up: both values appear, each for both sites, and the records carry
// wan.mtu; a 8000-byte rr request crosses at 9000 as at 1500.
func TestWANMTUSweep(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "mtus")
	recs, _ := runWAN(t, fmt.Sprintf(`name: mtu-sweep
datapaths:
  - name: custom
    label: mtu-probe
    up: "ip -o link show eth0 | grep -o 'mtu [0-9]*' >> %s; exec socat TCP-LISTEN:17102,bind=$SPANPERF_SITE_ADDR,reuseaddr,fork SYSTEM:true"
    ready: "{site_addr}:17102"
    target: "{peer_addr}:{port}"
wan: {mtu: [1500, 9000]}
workloads:
  - type: rr
    request_size: 8000
repetitions: 1
duration: 300ms
warmup: 100ms
`, out))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(strings.ReplaceAll(string(b), "mtu ", "mtu="))
	slices.Sort(lines)
	if want := []string{"mtu=1500", "mtu=1500", "mtu=9000", "mtu=9000"}; !slices.Equal(lines, want) {
		t.Errorf("underlay MTUs seen by the sites: %v, want %v", lines, want)
	}
	var mtus []any
	for _, r := range recs {
		mtus = append(mtus, r.Params[results.WANMTUParam])
		if r.Metrics[results.TransactionsPerS] <= 0 {
			t.Errorf("mtu %v: rr %v/s", r.Params[results.WANMTUParam], r.Metrics[results.TransactionsPerS])
		}
	}
	if len(recs) != 2 || !slices.Contains(mtus, any(1500.0)) || !slices.Contains(mtus, any(9000.0)) {
		t.Errorf("records' wan.mtu: %v, want 1500 and 9000", mtus)
	}
}

// TestWANEmulatorMTU9000: with MTU 9000 and a delay, Open vSwitch's
// tunnel (which forbids fragmenting its 9000-byte packets) carries a
// stream through the userspace emulator. With the emulator's TUN device at
// its default MTU of 1500 it carried nothing: 0 bit/s.
func TestWANEmulatorMTU9000(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: emu-mtu
datapaths: [ovs-vxlan]
wan: {mtu: 9000, delay: 5ms, emulator: userspace}
workloads:
  - type: stream
    streams: 8
    congestion: cubic
repetitions: 1
duration: 2s
warmup: 1s
`)
	bps := recs[0].Metrics[results.ThroughputBPS]
	t.Logf("ovs-vxlan at MTU 9000 over 10 ms RTT: %.0f Mbit/s", bps/1e6)
	if bps < 20e6 {
		t.Errorf("ovs-vxlan at MTU 9000 through the emulator: %.1f Mbit/s, want ≥ 20", bps/1e6)
	}
}
