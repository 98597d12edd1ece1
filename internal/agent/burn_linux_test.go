package agent

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func processCPU(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Burn spins the CPU it is asked for, on its threads' own clocks: 0.5
// cores over 2 s is a second of this process's CPU, ±10% (the rest of the
// test process is idle).
func TestBurnKnownCost(t *testing.T) {
	const cores, d = 0.5, 2 * time.Second
	c0 := processCPU(t)
	if err := Burn(context.Background(), cores, d); err != nil {
		t.Fatal(err)
	}
	got := (processCPU(t) - c0).Seconds() / d.Seconds()
	t.Logf("burned %.3f cores", got)
	if math.Abs(got-cores) > 0.1*cores {
		t.Errorf("burned %.3f cores, want %.1f ±10%%", got, cores)
	}
}

func TestBurnBadArgs(t *testing.T) {
	for _, c := range []struct {
		cores float64
		d     time.Duration
	}{{0, time.Second}, {-1, time.Second}, {float64(runtime.NumCPU()) + 1, time.Second}, {math.NaN(), time.Second}, {0.5, 0}, {0.5, MaxBurn + 1}} {
		if err := Burn(context.Background(), c.cores, c.d); err == nil {
			t.Errorf("Burn(%v, %v): no error", c.cores, c.d)
		}
	}
}
