package scenario

import (
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestWANLinkSweep: a link's lists become matrix points named
// wan.link.A-B.KEY, crossed with the wan-wide sweeps; a scalar stays out of
// the parameters.
func TestWANLinkSweep(t *testing.T) {
	src := `name: w
sites: 3
datapaths: [native]
workloads: [{type: rr}]
wan:
  delay: [0s, 1ms]
  links:
    - {between: [a, c], delay: [1ms, 5ms], loss: [0, 1%]}
    - {between: [b, c], delay: 2ms, rate: [100mbit]}
`
	s, err := Parse("w.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	pts := s.Points()
	if len(pts) != 8 {
		t.Fatalf("%d points, want 2 × 2 × 2 × 1 = 8", len(pts))
	}
	ac, acLoss, bc := results.WANLinkParam("a", "c", "delay"), results.WANLinkParam("a", "c", "loss_percent"), results.WANLinkParam("b", "c", "rate_bps")
	if ac != "wan.link.a-c.delay" {
		t.Errorf("param name %q", ac)
	}
	want := results.Params{results.WANDelayParam: "1ms", ac: "5ms", acLoss: 1.0, bc: int64(1e8)}
	for k, v := range want {
		if pts[7].Params[k] != v {
			t.Errorf("last point: %s = %#v, want %#v (point %v)", k, pts[7].Params[k], v, pts[7].Params)
		}
	}
	if _, ok := pts[0].Params[results.WANLinkParam("b", "c", "delay")]; ok {
		t.Error("a scalar link delay became a parameter")
	}
	if l := s.WAN.Links[1]; l.Delay.String() != "2ms" || len(l.DelaySweep) != 0 {
		t.Errorf("scalar link %+v", l)
	}
}

// TestWANMTUSweep: wan.mtu as a list is a matrix parameter wan.mtu (an
// int64 per point) and MTU is its first value; a scalar is no parameter.
func TestWANMTUSweep(t *testing.T) {
	s, err := Parse("w.yaml", []byte("name: w\ndatapaths: [native]\nworkloads: [{type: rr}]\nwan: {mtu: [1500, 9000]}\n"), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	pts := s.Points()
	if len(pts) != 2 || pts[0].Params[results.WANMTUParam] != int64(1500) || pts[1].Params[results.WANMTUParam] != int64(9000) || s.WAN.MTU != 1500 {
		t.Errorf("points %v, MTU %d", pts, s.WAN.MTU)
	}
	s, err = Parse("w.yaml", []byte("name: w\ndatapaths: [native]\nworkloads: [{type: rr}]\nwan: {mtu: 9000}\n"), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Points()[0].Params[results.WANMTUParam]; ok || s.WAN.MTU != 9000 {
		t.Errorf("scalar mtu: points %v, MTU %d", s.Points(), s.WAN.MTU)
	}
}
