package results

import (
	"reflect"
	"testing"
)

// A tail percentile from fewer samples than it needs goes to missing with
// the count; one from enough stays; a map without a count is untouched;
// applying the rule twice changes nothing.
func TestDropThinTails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      map[string]float64
		want    map[string]float64
		missing map[string]string
	}{
		{"640 samples", map[string]float64{LatencySamples: 640, LatencyP99: 1, LatencyP999: 2, LatencyP9999: 3},
			map[string]float64{LatencySamples: 640, LatencyP99: 1},
			map[string]string{LatencyP999: "640 samples, needs ≥ 1000", LatencyP9999: "640 samples, needs ≥ 10000"}},
		{"1000 samples", map[string]float64{LatencySamples: 1000, LatencyP999: 2, LatencyP9999: 3},
			map[string]float64{LatencySamples: 1000, LatencyP999: 2},
			map[string]string{LatencyP9999: "1000 samples, needs ≥ 10000"}},
		{"10000 samples", map[string]float64{LatencySamples: 10000, LatencyP999: 2, LatencyP9999: 3},
			map[string]float64{LatencySamples: 10000, LatencyP999: 2, LatencyP9999: 3}, nil},
		{"no p99.9 reported", map[string]float64{LatencySamples: 10, LatencyP99: 1},
			map[string]float64{LatencySamples: 10, LatencyP99: 1}, nil},
		{"no count", map[string]float64{LatencyP999: 2},
			map[string]float64{LatencyP999: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.in
			missing := DropThinTails(m, nil)
			if !reflect.DeepEqual(m, tc.want) || !reflect.DeepEqual(missing, tc.missing) {
				t.Errorf("got %v %v, want %v %v", m, missing, tc.want, tc.missing)
			}
			again := DropThinTails(m, missing)
			if !reflect.DeepEqual(m, tc.want) || !reflect.DeepEqual(again, tc.missing) {
				t.Errorf("twice: got %v %v", m, again)
			}
		})
	}
	kept := DropThinTails(map[string]float64{LatencySamples: 5, LatencyP999: 1}, map[string]string{"x": "y"})
	if kept["x"] != "y" || kept[LatencyP999] == "" {
		t.Errorf("missing %v: want the old entry kept and the new one added", kept)
	}
}
