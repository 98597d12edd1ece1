package agent

import (
	"context"
	"sync"
	"time"
)

// EveryInterval starts attempt in a goroutine of its own every interval,
// the first at once, until ctx ends, with at most inFlight running at
// once (when that many run, the next starts as soon as one ends). It
// waits for every attempt to return and returns how many it started.
//
// Attempts do not wait for one another: a SYN lost while a path was down
// would otherwise hold the probe for the kernel's retransmission time, and
// the probe would see the path come back late. Each attempt gets ctx and
// must bound itself.
func EveryInterval(ctx context.Context, interval time.Duration, inFlight int, attempt func(ctx context.Context)) int {
	sem := make(chan struct{}, max(inFlight, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	for {
		select {
		case sem <- struct{}{}:
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				attempt(ctx)
			}()
		case <-ctx.Done():
			return n
		}
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
	}
}
