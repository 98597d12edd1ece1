package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MaxBurn bounds `agent burn --duration`.
const MaxBurn = 10 * time.Minute

// Burn spins cores CPUs' worth of CPU for d, or until ctx is done: one
// thread per whole core, busy all the time, and one more busy the
// fraction left over, in 10 ms periods, on its own thread's CPU clock
// (time a loaded machine's scheduler gave to others is made up later), so
// that the cost is the same on a loaded machine as far as it can be. It
// is the known cost the node probe's tests inject into a pod.
func Burn(ctx context.Context, cores float64, d time.Duration) error {
	if cores <= 0 || cores > float64(runtime.NumCPU()) || math.IsNaN(cores) {
		return fmt.Errorf("burn: cores must be in (0, %d], got %g", runtime.NumCPU(), cores)
	}
	if d <= 0 || d > MaxBurn {
		return fmt.Errorf("burn: duration must be in (0, %v], got %v", MaxBurn, d)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	whole, frac := math.Modf(cores)
	var wg sync.WaitGroup
	spin := func(duty float64) {
		defer wg.Done()
		runtime.LockOSThread()
		// Spin until this thread has had duty of the time since it began
		// (a period ahead), then sleep to the next period: time the
		// scheduler gave to others is made up in the next periods.
		const period = 10 * time.Millisecond
		start, c0 := time.Now(), threadCPU()
		for ctx.Err() == nil {
			el := time.Since(start)
			want := time.Duration(duty * float64(el+period))
			for threadCPU()-c0 < want {
			}
			if duty < 1 {
				time.Sleep(period - time.Since(start)%period)
			}
		}
	}
	for i := 0; i < int(whole); i++ {
		wg.Add(1)
		go spin(1)
	}
	if frac > 0 {
		wg.Add(1)
		go spin(frac)
	}
	wg.Wait()
	return nil
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// burnMain runs `spanperf agent burn --cores X --duration D`.
func burnMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent burn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cores := fs.Float64("cores", 0, "CPUs' worth of CPU to spin (0.5: half of one)")
	d := fs.Duration("duration", 0, "how long (at most "+MaxBurn.String()+")")
	if fs.Parse(args) != nil {
		return 2
	}
	if err := Burn(context.Background(), *cores, *d); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
