package datapath_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// TestExposeThenUndo: through native, wireguard, mtls-relay, vxlan and ipsec, a service
// that starts listening after setup is reached from the other site once
// exposed, and no more once the exposure is undone; a second exposure
// after it works too (fresh address or port, nothing left in the way).
func TestExposeThenUndo(t *testing.T) {
	datapathtest.RequireRoot(t)
	for _, name := range []string{"native", "wireguard", "mtls-relay", "vxlan", "ipsec", "mesh-gateway"} {
		t.Run(name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, name, datapathtest.Defaults(t, name))
			if link.Expose == nil {
				t.Fatal("no Link.Expose")
			}
			sites := tb.LocalSites()
			a, b := sites[0], sites[1]
			for i, port := range []int{7301, 7302} {
				datapathtest.Serve(t, b, netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)))
				e, err := link.Expose(context.Background(), b, port)
				if err != nil {
					t.Fatalf("expose %d: %v", i, err)
				}
				target := datapathtest.AddrOf(t, e.Target(a))
				if err := datapathtest.Dial(a, target, 5*time.Second); err != nil {
					t.Errorf("exposure %d: %s → %s: %v", i, a.Name(), target, err)
				}
				if err := e.Undo(context.Background()); err != nil {
					t.Fatalf("undo %d: %v", i, err)
				}
				if err := datapathtest.Dial(a, target, 300*time.Millisecond); err == nil {
					t.Errorf("exposure %d: %s still reaches %s after undo", i, a.Name(), target)
				}
			}
		})
	}
}
