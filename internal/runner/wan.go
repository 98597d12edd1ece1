package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/wanemu"
)

// WANEmulator is the emulator a run of s uses for its wan's delay, jitter,
// loss and links: "" when s needs none (or runs on Kubernetes sites),
// otherwise netns.EmulatorNetem or netns.EmulatorUserspace, as
// netns.ChooseEmulator picks for s's wan.emulator.
func WANEmulator(s *scenario.Scenario) (string, error) {
	if s.IsKube() || !s.WAN.Emulated() {
		return "", nil
	}
	return netns.ChooseEmulator(s.WAN.Emulator, len(s.WAN.Links) > 0)
}

// WANShape is the shape of s's wan at a trial's parameters over a testbed
// of sites sites: the point's delay, jitter and loss on every ordered pair
// of sites, overridden per pair by wan.links.
func WANShape(s *scenario.Scenario, sites int, p results.Params) (netns.WANShape, error) {
	var base wanemu.LinkSpec
	for name, dst := range map[string]*time.Duration{results.WANDelayParam: &base.Delay, results.WANJitterParam: &base.Jitter} {
		if v, ok := p[name]; ok {
			d, err := time.ParseDuration(fmt.Sprint(v))
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", name, err)
			}
			*dst = d
		}
	}
	if v, ok := p[results.WANLossParam]; ok {
		x, ok := number(v)
		if !ok {
			return nil, fmt.Errorf("parameter %s: %v is not a number", results.WANLossParam, v)
		}
		base.Loss = x / 100
	}
	shape := netns.WANShape{}
	if base != (wanemu.LinkSpec{}) {
		for i := range sites {
			for j := range sites {
				if i != j {
					shape[[2]int{i, j}] = base
				}
			}
		}
	}
	index := map[string]int{}
	for i := range sites {
		index[testbed.SiteName(i)] = i
	}
	for _, l := range s.WAN.Links {
		a, aok := index[l.Between[0]]
		b, bok := index[l.Between[1]]
		if !aok || !bok {
			return nil, fmt.Errorf("wan.links: %s–%s: not sites of this scenario", l.Between[0], l.Between[1])
		}
		for _, k := range [][2]int{{a, b}, {b, a}} {
			ls := shape[k]
			if l.Delay > 0 {
				ls.Delay = l.Delay
			}
			if l.Jitter > 0 {
				ls.Jitter = l.Jitter
			}
			if l.LossPercent > 0 {
				ls.Loss = l.LossPercent / 100
			}
			if l.RateBPS > 0 {
				ls.RateBPS = l.RateBPS
			}
			if err := linkPoint(l, p, &ls); err != nil {
				return nil, err
			}
			shape[k] = ls
		}
	}
	return shape, nil
}

// shapeWAN gives a local testbed the wan shape of a trial's parameters
// (nothing for a scenario whose wan needs no emulator).
func shapeWAN(ctx context.Context, s *scenario.Scenario, tb testbed.Testbed, p results.Params) error {
	ltb, ok := tb.(*netns.Testbed)
	if !ok || !s.WAN.Emulated() {
		return nil
	}
	emu, err := WANEmulator(s)
	if err != nil {
		return err
	}
	shape, err := WANShape(s, len(tb.Sites()), p)
	if err != nil {
		return err
	}
	return ltb.ShapeWAN(ctx, emu, shape, func(args ...string) testbed.Command { return agent.Command("wan-emulator", args...) })
}

// ShapeFirstWAN gives a local testbed the wan shape of the first point of
// s's wan sweeps (the first value of each list), for `spanperf up`, and
// returns that point's parameters (empty without sweeps). A testbed
// without wan delay, jitter, loss or links is left as it is.
func ShapeFirstWAN(ctx context.Context, s *scenario.Scenario, tb testbed.Testbed) (results.Params, error) {
	p := s.FirstWANPoint()
	return p, shapeWAN(ctx, s, tb, p)
}
