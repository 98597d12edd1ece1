package scenario

import (
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/spanperf/spanperf/internal/results"
)

// linkSweep decodes a wan.links entry's key given as a list into l's sweep
// fields and reports whether it did; a scalar is left to the caller.
func (p *parser) linkSweep(key, kp string, v *yaml.Node, l *WANLink) bool {
	if deref(v).Kind != yaml.SequenceNode || key == "between" {
		return false
	}
	items := p.list(v, kp)
	for j, e := range items {
		ek := elemKey(kp, j, len(items))
		p.lines[ek] = e.Line
		switch key {
		case "delay", "jitter":
			x, ok := p.value(KindDuration, e, ek)
			if !ok {
				continue
			}
			d := x.(time.Duration)
			dst := &l.DelaySweep
			if key == "jitter" {
				dst = &l.JitterSweep
			}
			switch {
			case d < 0:
				p.errorf(e, ek, "must be ≥ 0s, got %v", d)
			case slices.Contains(*dst, d):
				p.errorf(e, ek, "duplicate value %v", d)
			default:
				*dst = append(*dst, d)
			}
		case "loss":
			if x, ok := p.percent(e, ek); ok {
				if slices.Contains(l.LossSweep, x) {
					p.errorf(e, ek, "duplicate value %v%%", x)
				} else {
					l.LossSweep = append(l.LossSweep, x)
				}
			}
		case "rate":
			if x, ok := p.top(KindRate, e, ek); ok {
				if r := x.(int64); slices.Contains(l.RateSweep, r) {
					p.errorf(e, ek, "duplicate value %d bit/s", r)
				} else {
					l.RateSweep = append(l.RateSweep, r)
				}
			}
		}
	}
	return true
}

// mtuSweep decodes wan.mtu given as a list into w.MTUSweep (and w.MTU, its
// first value) and reports whether it did; a scalar is left to the caller.
func (p *parser) mtuSweep(kp string, v *yaml.Node, w *WAN) bool {
	if deref(v).Kind != yaml.SequenceNode {
		return false
	}
	items := p.list(v, kp)
	for j, e := range items {
		ek := elemKey(kp, j, len(items))
		x, ok := p.value(KindInt, e, ek)
		if !ok {
			continue
		}
		if msg := checkTop("wan.mtu", x); msg != "" {
			p.errorf(e, ek, "%s", msg)
			continue
		}
		if m := int(x.(int64)); slices.Contains(w.MTUSweep, m) {
			p.errorf(e, ek, "duplicate value %d", m)
		} else {
			w.MTUSweep = append(w.MTUSweep, m)
		}
	}
	if len(w.MTUSweep) > 0 {
		w.MTU = w.MTUSweep[0]
	}
	return true
}

// linkSweepPoints crosses pts with the sweep of the MTU, then every link's
// sweeps, in the order the links and their keys are written, as parameters
// results.WANMTUParam and results.WANLinkParam.
func (s *Scenario) linkSweepPoints(pts []results.Params) []results.Params {
	dur := func(d time.Duration) any { return d.String() }
	if len(s.WAN.MTUSweep) > 0 {
		pts = cross(pts, paramList(results.WANMTUParam, s.WAN.MTUSweep, func(m int) any { return int64(m) }))
	}
	for _, l := range s.WAN.Links {
		a, b := l.Between[0], l.Between[1]
		if len(l.DelaySweep) > 0 {
			pts = cross(pts, paramList(results.WANLinkParam(a, b, results.WANLinkDelay), l.DelaySweep, dur))
		}
		if len(l.JitterSweep) > 0 {
			pts = cross(pts, paramList(results.WANLinkParam(a, b, results.WANLinkJitter), l.JitterSweep, dur))
		}
		if len(l.LossSweep) > 0 {
			pts = cross(pts, paramList(results.WANLinkParam(a, b, results.WANLinkLossPercent), l.LossSweep, func(x float64) any { return x }))
		}
		if len(l.RateSweep) > 0 {
			pts = cross(pts, paramList(results.WANLinkParam(a, b, results.WANLinkRateBPS), l.RateSweep, func(x int64) any { return x }))
		}
	}
	return pts
}
