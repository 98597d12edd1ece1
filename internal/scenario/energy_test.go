package scenario

import "testing"

func TestParseEnergy(t *testing.T) {
	for _, c := range []struct {
		src  string
		want Energy
	}{
		{"", Energy{WattsPerCore: DefaultWattsPerCore}},
		{"energy: {idle_watts: 45, watts_per_core: 7.5}\n", Energy{IdleWatts: 45, WattsPerCore: 7.5}},
		{"energy:\n  idle_watts: 30\n", Energy{IdleWatts: 30, WattsPerCore: DefaultWattsPerCore}},
		{"energy: {watts_per_core: 12}\n", Energy{WattsPerCore: 12}},
	} {
		s, err := Parse("e.yaml", []byte("datapaths: [native]\nworkloads: [{type: stream}]\n"+c.src), fakeCatalog{})
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if s.Energy != c.want {
			t.Errorf("%q: energy %+v, want %+v", c.src, s.Energy, c.want)
		}
		if err := s.Validate(fakeCatalog{}); err != nil {
			t.Errorf("%q: Validate: %v", c.src, err)
		}
	}
	s, err := Parse("e.yaml", []byte("datapaths: [native]\nworkloads: [{type: stream}]\n"), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	s.Energy.IdleWatts = -1
	if err := s.Validate(fakeCatalog{}); err == nil || err.Error() != "scenario e.yaml: energy.idle_watts: must be ≥ 0 and < 1e9 watts, got -1" {
		t.Errorf("Validate with idle_watts -1: %v", err)
	}
}
