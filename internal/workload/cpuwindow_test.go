package workload

import (
	"math"
	"testing"
	"time"
)

// steadyRemote is a remote server burning a known share of a CPU since it started.
type steadyRemote struct {
	start time.Time
	cores float64
}

func (steadyRemote) Wait() error              { return nil }
func (steadyRemote) Done() <-chan struct{}    { return nil }
func (steadyRemote) Stop(time.Duration) error { return nil }
func (steadyRemote) Tail() string             { return "" }
func (r steadyRemote) cpuSeconds() (float64, error) {
	time.Sleep(30 * time.Millisecond) // an exec's latency
	return r.cores * time.Since(r.start).Seconds(), nil
}

// TestCPUWindowRemote: a remote server's CPU, read outside the window,
// is scaled to the window: 0.4 cores over a 1 s window is 0.4 CPU
// seconds, though the reads span 1.7 s.
func TestCPUWindowRemote(t *testing.T) {
	w := watchCPU(steadyRemote{start: time.Now(), cores: 0.4}, 600*time.Millisecond, time.Second)
	defer w.stop()
	time.Sleep(600*time.Millisecond + time.Second + remoteLag + 100*time.Millisecond)
	got, ok := w.seconds()
	if !ok || math.Abs(got-0.4) > 0.02 {
		t.Errorf("seconds = %.4f, %v, want 0.4", got, ok)
	}
}
