package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteP is the exact two-sided p-value by enumerating every way to split the
// pooled values into samples of sizes len(a) and len(b), counting U for each
// split by comparing all pairs. It shares no code with MannWhitneyU.
func bruteP(a, b []float64) float64 {
	pooled := append(slices.Clone(a), b...)
	n, n1 := len(pooled), len(a)
	pairU := func(x, y []float64) float64 {
		var u float64
		for _, xi := range x {
			for _, yj := range y {
				switch {
				case xi > yj:
					u++
				case xi == yj:
					u += 0.5
				}
			}
		}
		return u
	}
	obs := pairU(a, b)
	var total, le, ge float64
	for mask := 0; mask < 1<<n; mask++ {
		if popcount(mask) != n1 {
			continue
		}
		var x, y []float64
		for i, v := range pooled {
			if mask&(1<<i) != 0 {
				x = append(x, v)
			} else {
				y = append(y, v)
			}
		}
		u := pairU(x, y)
		total++
		if u <= obs {
			le++
		}
		if u >= obs {
			ge++
		}
	}
	return math.Min(1, 2*math.Min(le, ge)/total)
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

func TestMannWhitneyKnown(t *testing.T) {
	// Complete separation of 5 and 5: P(U = 0) = 1/C(10,5) = 1/252, two-sided 2/252.
	p, err := MannWhitneyU([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2.0 / 252; math.Abs(p-want) > 1e-15 {
		t.Errorf("p = %v, want 2/252 = %v", p, want)
	}
	// Swapping the samples gives the same two-sided p.
	if q, _ := MannWhitneyU([]float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}); q != p {
		t.Errorf("swapped: p = %v, want %v", q, p)
	}

	// R's ?wilcox.test example (Hollander & Wolfe, p. 111): W = 35, exact
	// one-sided p = 0.1272, so two-sided 0.2544.
	x := []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	y := []float64{1.15, 0.88, 0.90, 0.74, 1.21}
	p, err = MannWhitneyU(x, y)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(p-0.2544) > 1e-4 {
		t.Errorf("Hollander & Wolfe example: p = %v, want 0.2544", p)
	}
	if b := bruteP(x, y); math.Abs(p-b) > 1e-12 {
		t.Errorf("Hollander & Wolfe example: p = %v, brute force %v", p, b)
	}
}

// TestMannWhitneyCriticalValues checks published two-sided α = 0.05 critical
// values of U: U ≤ crit is significant, U = crit+1 is not.
func TestMannWhitneyCriticalValues(t *testing.T) {
	tests := []struct{ n1, n2, crit int }{
		{5, 5, 2}, {5, 6, 3}, {5, 7, 5}, {5, 8, 6}, {5, 9, 7}, {5, 10, 8},
		{6, 6, 5}, {7, 7, 8}, {8, 8, 13}, {9, 9, 17}, {10, 10, 23}, {20, 20, 127},
	}
	for _, tt := range tests {
		for _, u := range []int{tt.crit, tt.crit + 1} {
			a, b := samplesWithU(tt.n1, tt.n2, u)
			p, err := MannWhitneyU(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if sig := p <= 0.05; sig != (u <= tt.crit) {
				t.Errorf("n1=%d n2=%d U=%d: p = %v, critical value %d", tt.n1, tt.n2, u, p, tt.crit)
			}
		}
	}
}

// samplesWithU builds tie-free samples of sizes n1 and n2 whose U (pairs with
// the first sample's value larger) is u.
func samplesWithU(n1, n2, u int) (a, b []float64) {
	for j := 1; j <= n2; j++ {
		b = append(b, float64(j))
	}
	for i := range n1 {
		k := min(u, n2) // this value beats k values of b
		u -= k
		a = append(a, float64(k)+0.1+0.01*float64(i))
	}
	return a, b
}

func TestMannWhitneyExactVsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n1, n2 := 1+r.IntN(7), 1+r.IntN(7)
		// Distinct values: a shuffled prefix of a random permutation.
		perm := r.Perm(n1 + n2)
		vals := make([]float64, len(perm))
		for i, v := range perm {
			vals[i] = float64(v) + r.Float64()*0.5
		}
		a, b := vals[:n1], vals[n1:]
		p, err := MannWhitneyU(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteP(a, b); math.Abs(p-want) > 1e-12 {
			t.Errorf("a=%v b=%v: p = %v, brute force %v", a, b, p, want)
		}
	}
}

// normalRef is the tie-corrected normal approximation computed a second way:
// the rank sum of a has mean n1(n+1)/2 and, under random assignment of the
// midranks, variance n1·n2/(n(n-1))·Σ(r - r̄)².
func normalRef(a, b []float64) float64 {
	pooled := append(slices.Clone(a), b...)
	n1, n2, n := len(a), len(b), len(pooled)
	rank := func(v float64) float64 { // midrank by counting
		var less, equal float64
		for _, w := range pooled {
			if w < v {
				less++
			} else if w == v {
				equal++
			}
		}
		return less + (equal+1)/2
	}
	var w, ss float64
	mean := float64(n+1) / 2
	for i, v := range pooled {
		r := rank(v)
		if i < n1 {
			w += r
		}
		ss += (r - mean) * (r - mean)
	}
	ew := float64(n1) * float64(n+1) / 2
	sd := math.Sqrt(float64(n1*n2) / float64(n*(n-1)) * ss)
	z := math.Max(0, math.Abs(w-ew)-0.5) / sd
	return 2 * (1 - 0.5*(1+math.Erf(z/math.Sqrt2)))
}

func TestMannWhitneyTies(t *testing.T) {
	tests := []struct{ a, b []float64 }{
		{[]float64{1, 2, 2, 3, 3, 3}, []float64{3, 4, 4, 5, 5, 6}},
		{[]float64{10, 10, 11, 12}, []float64{10, 12, 12, 13, 14, 14, 15}},
		{[]float64{1, 1, 1}, []float64{1, 1, 2}},
		{[]float64{5}, []float64{5, 6}},
	}
	for _, tt := range tests {
		p, err := MannWhitneyU(tt.a, tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if want := normalRef(tt.a, tt.b); math.Abs(p-want) > 1e-12 {
			t.Errorf("a=%v b=%v: p = %v, want %v", tt.a, tt.b, p, want)
		}
	}
	// All values equal: no evidence of a difference.
	if p, err := MannWhitneyU([]float64{3, 3}, []float64{3, 3, 3}); err != nil || p != 1 {
		t.Errorf("all equal: p = %v, err = %v; want 1, nil", p, err)
	}
}

func TestMannWhitneyLarge(t *testing.T) {
	// Above 20 values the normal approximation is used; check it against
	// the exact distribution, which is still cheap at 25 and 25.
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		perm := r.Perm(50)
		vals := make([]float64, 50)
		for i, v := range perm {
			vals[i] = float64(v)
		}
		// Bias a upwards so p spans a range of values.
		shift := r.IntN(10)
		for i := range 25 {
			vals[i] += float64(shift) + 0.5 // +0.5 keeps values distinct
		}
		a, b := vals[:25], vals[25:]
		p, err := MannWhitneyU(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := normalRef(a, b); math.Abs(p-want) > 1e-12 {
			t.Errorf("p = %v, second method %v", p, want)
		}
		var u int
		for _, x := range a {
			for _, y := range b {
				if x > y {
					u++
				}
			}
		}
		if exact := exactP(25, 25, u); math.Abs(p-exact) > 0.005 {
			t.Errorf("U=%d: normal approximation %v, exact %v", u, p, exact)
		}
	}
}

func TestMannWhitneyErrors(t *testing.T) {
	if _, err := MannWhitneyU(nil, []float64{1}); err == nil {
		t.Error("empty a: no error")
	}
	if _, err := MannWhitneyU([]float64{1}, nil); err == nil {
		t.Error("empty b: no error")
	}
	if _, err := MannWhitneyU([]float64{1, math.NaN()}, []float64{1}); err == nil {
		t.Error("NaN: no error")
	}
}

func TestMannWhitneyDoesNotModify(t *testing.T) {
	a, b := []float64{3, 1, 2}, []float64{6, 4, 5}
	ca, cb := slices.Clone(a), slices.Clone(b)
	if _, err := MannWhitneyU(a, b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, ca) || !slices.Equal(b, cb) {
		t.Errorf("inputs modified: %v %v", a, b)
	}
}
