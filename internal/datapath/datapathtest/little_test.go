package datapathtest

import "testing"

// TestCheckLittle: true closed-loop figures pass, a mean latency understated
// (or overstated) by 2× fails, whatever the share of time the client spent
// between transactions within what the datapaths show.
func TestCheckLittle(t *testing.T) {
	for _, tc := range []struct {
		name             string
		rate, mean, conc float64
		ok               bool
	}{
		// rr at concurrency 2, 50 µs per transaction, 1% of the time between
		// transactions: 39.6k/s.
		{"rr true", 39600, 50e-6, 2, true},
		{"rr mean understated 2×", 39600, 25e-6, 2, false},
		{"rr mean overstated 2×", 39600, 100e-6, 2, false},
		// crr at concurrency 1 whose latency leaves out socket() and close(),
		// 15% of each loop: 120 µs of 141 µs, 7.09k/s.
		{"crr true", 7090, 120e-6, 1, true},
		{"crr mean understated 2×", 7090, 60e-6, 1, false},
		// The most a true figure can be: every client always in flight.
		{"no gaps", 10000, 100e-6, 1, true},
		{"no gaps, understated 2×", 10000, 50e-6, 1, false},
		{"no latency recorded", 10000, 0, 1, false},
	} {
		err := checkLittle(tc.rate, tc.mean, tc.conc)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkLittle(%g, %g, %g) = %v, want ok %v", tc.name, tc.rate, tc.mean, tc.conc, err, tc.ok)
		}
	}
}
