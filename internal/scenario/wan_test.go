package scenario

import (
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// TestWANSweep: the wan's lists become matrix points, delay slowest; a
// scalar is a one-value list; per-pair links are kept as written.
func TestWANSweep(t *testing.T) {
	src := `name: w
sites: 3
datapaths: [native]
workloads: [{type: rr}]
wan:
  rate: 1gbit
  delay: [0s, 10ms]
  loss: [0, "0.5%"]
  jitter: 1ms
  links: [{between: [a, c], delay: 40ms, loss: 2}]
`
	s, err := Parse("w.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.WAN.Emulated() || s.WAN.RateBPS != 1e9 {
		t.Errorf("wan %+v", s.WAN)
	}
	if l := s.WAN.Links[0]; l.Between != [2]string{"a", "c"} || l.Delay != 40*time.Millisecond || l.LossPercent != 2 {
		t.Errorf("link %+v", l)
	}
	pts := s.Points()
	if len(pts) != 4 {
		t.Fatalf("%d points, want 4", len(pts))
	}
	want := []results.Params{
		{results.WANDelayParam: "0s", results.WANJitterParam: "1ms", results.WANLossParam: 0.0},
		{results.WANDelayParam: "0s", results.WANJitterParam: "1ms", results.WANLossParam: 0.5},
		{results.WANDelayParam: "10ms", results.WANJitterParam: "1ms", results.WANLossParam: 0.0},
		{results.WANDelayParam: "10ms", results.WANJitterParam: "1ms", results.WANLossParam: 0.5},
	}
	for i, p := range pts {
		for k, v := range want[i] {
			if p.Params[k] != v {
				t.Errorf("point %d: %s = %#v, want %#v", i, k, p.Params[k], v)
			}
		}
	}
	// Without wan sweeps the points carry no wan parameters.
	s2, err := Parse("w.yaml", []byte("name: w\ndatapaths: [native]\nworkloads: [{type: rr}]\nwan: {rate: 1gbit}\n"), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.WAN.Emulated() {
		t.Error("a rate alone needs no emulator (tbf shapes it)")
	}
	for _, p := range s2.Points() {
		if _, ok := p.Params[results.WANDelayParam]; ok {
			t.Errorf("point without wan sweeps has %v", p.Params)
		}
	}
}
