package stats

import (
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
)

// coverage computes, independently of medianOrder, the probability that
// [x(k), x(n-k+1)] covers the median: Σ_{i=k}^{n-k} C(n, i) / 2^n, with exact
// integer binomial coefficients.
func coverage(n, k int) float64 {
	num := new(big.Int)
	for i := k; i <= n-k; i++ {
		num.Add(num, new(big.Int).Binomial(int64(n), int64(i)))
	}
	den := new(big.Int).Lsh(big.NewInt(1), uint(n))
	f, _ := new(big.Rat).SetFrac(num, den).Float64()
	return f
}

func TestCoverageFormula(t *testing.T) {
	// Hand-computed: n=10, k=2 → 1 - 2·(1+10)/1024 = 1002/1024.
	if got, want := coverage(10, 2), 1002.0/1024; got != want {
		t.Errorf("coverage(10, 2) = %v, want %v", got, want)
	}
	// n=10, k=3 → 1 - 2·(1+10+45)/1024 = 912/1024.
	if got, want := coverage(10, 3), 912.0/1024; got != want {
		t.Errorf("coverage(10, 3) = %v, want %v", got, want)
	}
}

func TestMedianOrder(t *testing.T) {
	// Hand-computed orders for 95% (see coverage for the sums).
	hand := map[int]int{1: 1, 3: 1, 5: 1, 6: 1, 7: 1, 8: 1, 9: 2, 10: 2, 11: 2, 12: 3, 20: 6}
	for n := 1; n <= 200; n++ {
		k, conf := medianOrder(n)
		if want, ok := hand[n]; ok && k != want {
			t.Errorf("n=%d: k = %d, want %d", n, k, want)
		}
		if c := coverage(n, k); math.Abs(c-conf) > 1e-9 {
			t.Errorf("n=%d k=%d: confidence %v, independent coverage %v", n, k, conf, c)
		}
		if n >= 6 && conf < TargetConfidence {
			t.Errorf("n=%d: confidence %v below target", n, conf)
		}
		// k is the narrowest: k+1 must fall short (when it exists).
		if k+1 <= (n+1)/2 && coverage(n, k+1) >= TargetConfidence {
			t.Errorf("n=%d: k=%d but k+1 also reaches %v", n, k, TargetConfidence)
		}
		if n < 6 {
			if want := 1 - 2*math.Pow(0.5, float64(n)); math.Abs(conf-want) > 1e-12 || k != 1 {
				t.Errorf("n=%d: k=%d conf=%v, want k=1 conf=%v", n, k, conf, want)
			}
		}
	}
}

func TestSummarizeTen(t *testing.T) {
	xs := []float64{7, 3, 9, 1, 5, 10, 2, 8, 4, 6}
	orig := slices.Clone(xs)
	s := Summarize(xs)
	if !slices.Equal(xs, orig) {
		t.Fatalf("Summarize modified its input: %v", xs)
	}
	want := Summary{N: 10, Median: 5.5, Mean: 5.5, Min: 1, Max: 10, Lo: 2, Hi: 9, Confidence: 1002.0 / 1024}
	// Stddev of 1…10: sqrt(Σ(i-5.5)²/9) = sqrt(82.5/9).
	want.Stddev = math.Sqrt(82.5 / 9)
	checkSummary(t, s, want)
	// cv = 3.03/5.5 = 55%.
	if !slices.Equal(s.Warnings, []string{"high variance: cv=55%"}) {
		t.Errorf("warnings = %q", s.Warnings)
	}
}

func TestSummarizeTwenty(t *testing.T) {
	// 100…119 shuffled; x(6) = 105, x(15) = 114.
	xs := []float64{119, 101, 117, 103, 115, 105, 113, 107, 111, 109, 100, 118, 102, 116, 104, 114, 106, 112, 108, 110}
	s := Summarize(xs)
	if s.Lo != 105 || s.Hi != 114 || s.Median != 109.5 {
		t.Errorf("median %v [%v, %v], want 109.5 [105, 114]", s.Median, s.Lo, s.Hi)
	}
	if want := coverage(20, 6); math.Abs(s.Confidence-want) > 1e-12 {
		t.Errorf("confidence = %v, want %v", s.Confidence, want)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings = %q, want none", s.Warnings)
	}
}

func TestSummarizeSmall(t *testing.T) {
	s := Summarize([]float64{10.5, 9.5, 10})
	checkSummary(t, s, Summary{N: 3, Median: 10, Mean: 10, Stddev: 0.5, Min: 9.5, Max: 10.5, Lo: 9.5, Hi: 10.5, Confidence: 0.75})
	want := []string{"n=3: interval [min,max] covers the median with 75% confidence; 6 or more repetitions give 95%"}
	if !slices.Equal(s.Warnings, want) {
		t.Errorf("warnings = %q, want %q", s.Warnings, want)
	}

	s = Summarize([]float64{4, 2})
	checkSummary(t, s, Summary{N: 2, Median: 3, Mean: 3, Stddev: math.Sqrt2, Min: 2, Max: 4, Lo: 2, Hi: 4, Confidence: 0.5})
	want = []string{
		"fewer than 3 repetitions",
		"n=2: interval [min,max] covers the median with 50% confidence; 6 or more repetitions give 95%",
		"high variance: cv=47%",
	}
	if !slices.Equal(s.Warnings, want) {
		t.Errorf("warnings = %q, want %q", s.Warnings, want)
	}

	s = Summarize([]float64{1, 2, 3, 4, 5, 6, 7, 8}[:5])
	if s.Confidence != 0.9375 || !strings.Contains(s.Warnings[0], "93.75% confidence") {
		t.Errorf("n=5: confidence %v, warnings %q", s.Confidence, s.Warnings)
	}
	s = Summarize([]float64{100, 101, 102, 103, 104, 105})
	if s.Confidence != 1-2.0/64 || s.Lo != 100 || s.Hi != 105 || len(s.Warnings) != 0 {
		t.Errorf("n=6: %+v", s)
	}
}

func TestSummarizeEmptyAndNaN(t *testing.T) {
	s := Summarize(nil)
	if s.N != 0 || !slices.Equal(s.Warnings, []string{"no samples"}) {
		t.Errorf("Summarize(nil) = %+v", s)
	}
	nan := math.NaN()
	s = Summarize([]float64{nan, nan})
	if s.N != 0 || !slices.Equal(s.Warnings, []string{"no samples", "dropped 2 NaN values"}) {
		t.Errorf("all NaN: %+v", s)
	}
	s = Summarize([]float64{100, nan, 102, 101})
	checkSummary(t, s, Summary{N: 3, Median: 101, Mean: 101, Stddev: 1, Min: 100, Max: 102, Lo: 100, Hi: 102, Confidence: 0.75})
	if len(s.Warnings) != 2 || s.Warnings[0] != "dropped 1 NaN value" {
		t.Errorf("warnings = %q", s.Warnings)
	}
}

func TestSummarizeVarianceThreshold(t *testing.T) {
	// mean 100, stddev 10 exactly → cv = 10%: not above the threshold.
	s := Summarize([]float64{90, 100, 110})
	if len(s.Warnings) != 1 { // only the n=3 note
		t.Errorf("cv=10%%: warnings = %q", s.Warnings)
	}
	// mean 100, stddev 11 → cv = 11%.
	s = Summarize([]float64{89, 100, 111})
	if got := s.Warnings[len(s.Warnings)-1]; got != "high variance: cv=11%" {
		t.Errorf("cv=11%%: last warning %q", got)
	}
	// Negative mean uses |mean|.
	s = Summarize([]float64{-89, -100, -111})
	if got := s.Warnings[len(s.Warnings)-1]; got != "high variance: cv=11%" {
		t.Errorf("negative mean: last warning %q", got)
	}
}

func checkSummary(t *testing.T, got, want Summary) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
	if got.N != want.N || !near(got.Median, want.Median) || !near(got.Mean, want.Mean) ||
		!near(got.Stddev, want.Stddev) || got.Min != want.Min || got.Max != want.Max ||
		got.Lo != want.Lo || got.Hi != want.Hi || !near(got.Confidence, want.Confidence) {
		t.Errorf("summary = %+v\nwant      %+v", got, want)
	}
}

func TestChangePct(t *testing.T) {
	if got := ChangePct(200, 150); got != -25 {
		t.Errorf("ChangePct(200, 150) = %v, want -25", got)
	}
	// The formula as written: a negative base flips the sign.
	if got := ChangePct(-4, -5); got != 25 {
		t.Errorf("ChangePct(-4, -5) = %v, want 25", got)
	}
	if got := ChangePct(0, 1); !math.IsNaN(got) {
		t.Errorf("ChangePct(0, 1) = %v, want NaN", got)
	}
}
