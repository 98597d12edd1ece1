package stats

import (
	"math"
	"testing"
)

// The worked example of Benjamini and Hochberg (1995, J. R. Statist. Soc. B
// 57(1), section 4.1): 15 p-values from a study of myocardial infarction
// treatments. At q = 0.05 the procedure rejects the four smallest (the
// paper's result). The adjusted values are p(i)·15/i with the running minimum
// taken from the top, worked by hand: e.g. p(4) = 0.0095·15/4 = 0.035625,
// p(6) = min(0.0278·15/6, 0.0298·15/7) = 0.0298·15/7.
func TestAdjustBHWorkedExample(t *testing.T) {
	ps := []float64{0.0201, 0.0001, 0.0004, 0.0019, 0.0095, 0.0278, 0.0298, 0.0344,
		0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000}
	want := []float64{0.0603, 0.0015, 0.003, 0.0095, 0.035625, 0.0298 * 15 / 7, 0.0298 * 15 / 7, 0.0645,
		0.0765, 0.486, 0.4262 * 15 / 11, 0.5719 * 15 / 12, 0.6528 * 15 / 13, 0.7590 * 15 / 14, 1}
	got := AdjustBH(ps)
	rejected := 0
	for i := range ps {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("p=%v: adjusted %v, want %v", ps[i], got[i], want[i])
		}
		if got[i] < 0.05 {
			rejected++
		}
	}
	if rejected != 4 {
		t.Errorf("%d rejected at q=0.05, want 4 (the paper's result)", rejected)
	}
	if ps[0] != 0.0201 {
		t.Error("AdjustBH modified its input")
	}
}

func TestAdjustBHEdges(t *testing.T) {
	// One test: unchanged. NaN: kept, not counted (m = 2 here).
	if got := AdjustBH([]float64{0.03}); got[0] != 0.03 {
		t.Errorf("one test: %v", got)
	}
	got := AdjustBH([]float64{0.04, math.NaN(), 0.01})
	if got[0] != 0.04 || !math.IsNaN(got[1]) || got[2] != 0.02 {
		t.Errorf("with NaN: %v, want [0.04 NaN 0.02]", got)
	}
	// Capped at 1; ties share the value.
	got = AdjustBH([]float64{0.9, 0.9, 0.9})
	for _, v := range got {
		if v != 0.9 {
			t.Errorf("ties: %v", got)
		}
	}
	if got := AdjustBH([]float64{0.6, 1}); got[0] != 1 || got[1] != 1 {
		t.Errorf("cap: %v, want [1 1]", got)
	}
	if len(AdjustBH(nil)) != 0 {
		t.Error("nil input")
	}
}
