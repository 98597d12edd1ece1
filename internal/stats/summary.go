// Package stats summarizes repeated measurements and compares them: medians
// with distribution-free confidence intervals, the Mann-Whitney U test, and
// relative change. It knows nothing of how values are rendered.
package stats

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// TargetConfidence is the coverage Summarize aims for with its interval for
// the median.
const TargetConfidence = 0.95

// HighVariance is the coefficient of variation (stddev/|mean|) above which
// Summarize warns of high variance.
const HighVariance = 0.10

// Summary describes one sample: its center, spread, an interval for the
// median with the confidence that interval actually has, and warnings about
// anything that makes the numbers less trustworthy than they look.
type Summary struct {
	// N is the number of values summarized (NaN values excluded).
	N int
	// Median is the sample median; for even N, the mean of the two middle
	// values.
	Median float64
	// Mean is the arithmetic mean.
	Mean float64
	// Stddev is the sample standard deviation (divisor N-1); 0 when N is 1.
	Stddev float64
	// Min and Max are the smallest and largest values.
	Min, Max float64
	// Lo and Hi bound a distribution-free confidence interval for the
	// population median: the order statistics x(k) and x(N-k+1) (1-based,
	// ascending) for the largest k whose coverage reaches TargetConfidence.
	// When N is below 6 no such k exists and the interval is [Min, Max].
	Lo, Hi float64
	// Confidence is the probability that [Lo, Hi] covers the population
	// median, computed exactly from the binomial(N, 1/2) distribution:
	// 1 - 2·P(B ≤ k-1). It is at least TargetConfidence when N ≥ 6 and
	// 1 - 2·0.5^N (0.75 for N = 3) below that.
	Confidence float64
	// Warnings explain, in order, anything that weakens the summary. Each
	// starts with a fixed phrase, so callers can group them by kind:
	//   "no samples"
	//   "dropped K NaN values"
	//   "fewer than 3 repetitions"
	//   "n=N: interval [min,max] covers the median with C% confidence; 6 or more repetitions give 95%"
	//   "high variance: cv=P%" (coefficient of variation above HighVariance)
	Warnings []string
}

// Summarize describes xs. It does not modify xs. NaN values are dropped and
// counted in a warning; infinities are kept. With no values left it returns
// a Summary with N 0, all other numbers zero and a "no samples" warning.
func Summarize(xs []float64) Summary {
	vals := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	var warnings []string
	if dropped := len(xs) - len(vals); dropped > 0 {
		warnings = append(warnings, fmt.Sprintf("dropped %d NaN %s", dropped, plural(dropped, "value", "values")))
	}
	n := len(vals)
	if n == 0 {
		return Summary{Warnings: append([]string{"no samples"}, warnings...)}
	}
	slices.Sort(vals)

	s := Summary{N: n, Min: vals[0], Max: vals[n-1]}
	if n%2 == 1 {
		s.Median = vals[n/2]
	} else {
		s.Median = (vals[n/2-1] + vals[n/2]) / 2
	}
	var sum float64
	for _, v := range vals {
		sum += v
	}
	s.Mean = sum / float64(n)
	if n > 1 {
		var ss float64
		for _, v := range vals {
			d := v - s.Mean
			ss += d * d
		}
		s.Stddev = math.Sqrt(ss / float64(n-1))
	}

	k, conf := medianOrder(n)
	s.Lo, s.Hi, s.Confidence = vals[k-1], vals[n-k], conf

	if n < 3 {
		warnings = append(warnings, "fewer than 3 repetitions")
	}
	if conf < TargetConfidence {
		warnings = append(warnings, fmt.Sprintf(
			"n=%d: interval [min,max] covers the median with %s%% confidence; 6 or more repetitions give 95%%",
			n, strconv.FormatFloat(conf*100, 'f', -1, 64)))
	}
	if s.Mean != 0 {
		if cv := s.Stddev / math.Abs(s.Mean); cv > HighVariance {
			warnings = append(warnings, fmt.Sprintf("high variance: cv=%.0f%%", cv*100))
		}
	}
	s.Warnings = warnings
	return s
}

// medianOrder returns the largest k (1 ≤ k ≤ ceil(n/2)) such that the
// interval [x(k), x(n-k+1)] covers the population median with probability at
// least TargetConfidence, and that probability. When even k = 1 falls short,
// it returns 1 and the coverage of [min, max]. n must be positive.
//
// The population median lies below exactly B of n independent draws, with B
// binomial(n, 1/2); [x(k), x(n-k+1)] misses it when B < k or B > n-k, so
// its coverage is 1 - 2·P(B ≤ k-1).
func medianOrder(n int) (k int, coverage float64) {
	k = 1
	tail := binomPMF(n, 0) // P(B ≤ k-1)
	coverage = 1 - 2*tail
	for next := k + 1; next <= (n+1)/2; next++ {
		t := tail + binomPMF(n, next-1)
		c := 1 - 2*t
		if c < TargetConfidence {
			break
		}
		k, tail, coverage = next, t, c
	}
	return k, coverage
}

// binomPMF is P(B = i) for B binomial(n, 1/2).
func binomPMF(n, i int) float64 {
	lg := func(x int) float64 {
		v, _ := math.Lgamma(float64(x) + 1)
		return v
	}
	return math.Exp(lg(n) - lg(i) - lg(n-i) - float64(n)*math.Ln2)
}

// ChangePct is the change from base to x in percent of base:
// (x-base)/base×100. It is NaN when base is 0 or either value is NaN. With a
// negative base the sign follows the formula, so it no longer says which
// value is larger.
func ChangePct(base, x float64) float64 {
	if base == 0 {
		return math.NaN()
	}
	return (x - base) / base * 100
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
