package stats

import (
	"math"
	"slices"
)

// AdjustMethod names the correction AdjustBH applies, for output that must
// say how its p-values were adjusted.
const AdjustMethod = "Benjamini–Hochberg"

// AdjustBH adjusts p-values for multiple comparisons by the
// Benjamini–Hochberg step-up procedure and returns the adjusted values in the
// order of ps, which it does not modify. With the m non-NaN p-values sorted
// ascending as p(1) ≤ … ≤ p(m), the adjusted value of p(i) is
// min over j ≥ i of p(j)·m/j, capped at 1. Rejecting every hypothesis whose
// adjusted value is below q keeps the expected share of false rejections
// among all rejections (the false discovery rate) at or below q when the
// tests are independent or positively dependent; when no hypothesis is false
// it also keeps the chance of any rejection at or below q. NaN entries stay
// NaN and do not count in m.
func AdjustBH(ps []float64) []float64 {
	out := make([]float64, len(ps))
	var idx []int
	for i, p := range ps {
		out[i] = math.NaN()
		if !math.IsNaN(p) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case ps[a] < ps[b]:
			return -1
		case ps[a] > ps[b]:
			return 1
		}
		return 0
	})
	m := float64(len(idx))
	running := 1.0
	for r := len(idx) - 1; r >= 0; r-- {
		i := idx[r]
		running = math.Min(running, ps[i]*m/float64(r+1))
		out[i] = running
	}
	return out
}
