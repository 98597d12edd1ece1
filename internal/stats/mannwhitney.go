package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// exactLimit is the largest sample size for which MannWhitneyU uses the exact
// distribution of U.
const exactLimit = 20

// MannWhitneyU tests whether a and b come from the same distribution against
// the alternative that one tends to be larger than the other, and returns the
// two-sided p-value. Neither slice is modified.
//
// When the pooled values have no ties and both samples have at most 20
// values, p is exact: 2·min(P(U ≤ u), P(U ≥ u)) capped at 1, with the null
// distribution of U counted by dynamic programming. Otherwise p comes from
// the normal approximation with tie-corrected variance and a continuity
// correction of 1/2. When every value is equal, p is 1.
//
// It returns an error when either sample is empty or holds a NaN.
func MannWhitneyU(a, b []float64) (p float64, err error) {
	if len(a) == 0 || len(b) == 0 {
		return 0, fmt.Errorf("mann-whitney u: empty sample (sizes %d and %d)", len(a), len(b))
	}
	if slices.ContainsFunc(a, math.IsNaN) || slices.ContainsFunc(b, math.IsNaN) {
		return 0, errors.New("mann-whitney u: sample holds NaN")
	}
	n1, n2 := len(a), len(b)

	// Rank the pooled values, giving tied values the mean of their ranks.
	type item struct {
		v     float64
		fromA bool
	}
	pooled := make([]item, 0, n1+n2)
	for _, v := range a {
		pooled = append(pooled, item{v, true})
	}
	for _, v := range b {
		pooled = append(pooled, item{v, false})
	}
	slices.SortFunc(pooled, func(x, y item) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	var rankSumA float64
	var tieTerm float64 // Σ (t³ - t) over groups of t tied values
	for i := 0; i < len(pooled); {
		j := i
		for j < len(pooled) && pooled[j].v == pooled[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 … j
		for _, it := range pooled[i:j] {
			if it.fromA {
				rankSumA += rank
			}
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	// U counts pairs (x from a, y from b) with x > y, ties counting 1/2.
	u := rankSumA - float64(n1*(n1+1))/2

	if tieTerm == 0 && n1 <= exactLimit && n2 <= exactLimit {
		return exactP(n1, n2, int(math.Round(u))), nil
	}

	n := float64(n1 + n2)
	mu := float64(n1) * float64(n2) / 2
	variance := float64(n1) * float64(n2) / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 {
		return 1, nil
	}
	z := (math.Abs(u-mu) - 0.5) / math.Sqrt(variance)
	if z <= 0 {
		return 1, nil
	}
	return math.Min(1, math.Erfc(z/math.Sqrt2)), nil
}

// exactP is the exact two-sided p-value of U = u for samples of sizes n1 and
// n2 without ties.
func exactP(n1, n2, u int) float64 {
	counts := uCounts(n1, n2)
	var total, le, ge float64
	for i, c := range counts {
		total += c
		if i <= u {
			le += c
		}
		if i >= u {
			ge += c
		}
	}
	return math.Min(1, 2*math.Min(le, ge)/total)
}

// uCounts returns, for every u in 0…n1·n2, how many of the C(n1+n2, n1)
// equally likely arrangements of two tie-free samples give U = u.
//
// With f(i, j) the count polynomial for sizes i and j, the largest of the
// i+j values is either in the first sample (it beats all j values of the
// second, adding j to U) or in the second (adding nothing):
// f(i, j)[u] = f(i-1, j)[u-j] + f(i, j-1)[u].
func uCounts(n1, n2 int) []float64 {
	// row[j] holds f(i, j) for the current i.
	row := make([][]float64, n2+1)
	for j := range row {
		row[j] = []float64{1} // f(0, j): U is always 0
	}
	for i := 1; i <= n1; i++ {
		next := make([][]float64, n2+1)
		next[0] = []float64{1} // f(i, 0)
		for j := 1; j <= n2; j++ {
			f := make([]float64, i*j+1)
			for v, c := range row[j] { // f(i-1, j), shifted by j
				f[v+j] += c
			}
			for v, c := range next[j-1] { // f(i, j-1)
				f[v] += c
			}
			next[j] = f
		}
		row = next
	}
	return row[n2]
}
