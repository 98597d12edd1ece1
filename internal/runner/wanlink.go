package runner

import (
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/wanemu"
)

// linkPoint sets in ls the values link l sweeps, read from the trial's
// parameters (results.WANLinkParam). A swept value is set even when it is
// zero: delay [0, 5ms] means no delay on the link at the first point.
func linkPoint(l scenario.WANLink, p results.Params, ls *wanemu.LinkSpec) error {
	name := func(key string) string { return results.WANLinkParam(l.Between[0], l.Between[1], key) }
	for key, dst := range map[string]*time.Duration{results.WANLinkDelay: &ls.Delay, results.WANLinkJitter: &ls.Jitter} {
		if v, ok := p[name(key)]; ok {
			d, err := time.ParseDuration(fmt.Sprint(v))
			if err != nil {
				return fmt.Errorf("parameter %s: %w", name(key), err)
			}
			*dst = d
		}
	}
	if v, ok := p[name(results.WANLinkLossPercent)]; ok {
		x, ok := number(v)
		if !ok {
			return fmt.Errorf("parameter %s: %v is not a number", name(results.WANLinkLossPercent), v)
		}
		ls.Loss = x / 100
	}
	if v, ok := p[name(results.WANLinkRateBPS)]; ok {
		x, ok := number(v)
		if !ok {
			return fmt.Errorf("parameter %s: %v is not a number", name(results.WANLinkRateBPS), v)
		}
		ls.RateBPS = int64(x)
	}
	return nil
}
