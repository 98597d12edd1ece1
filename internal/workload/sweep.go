package workload

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// Metric and series names of the rate-sweep workload, beside the held
// step's own http metrics.
const (
	// MetricMaxSustainedRate is the highest offered rate, in requests/s,
	// at which a step held; 0 when the first step did not.
	MetricMaxSustainedRate = "max_sustained_requests_per_s"
	// MetricFirstFailedRate is the lowest offered rate at which a step
	// failed: the climb's first failure, lowered by any refinement step
	// that failed. The capacity lies between MetricMaxSustainedRate and
	// it. Absent when every step held (max_rate was reached).
	MetricFirstFailedRate = "first_failed_requests_per_s"
	// MetricSweepSteps is the number of steps the sweep ran.
	MetricSweepSteps = "sweep_steps"
	// SeriesSweepOfferedRate and SeriesSweepLatencyP99 hold one value per
	// step, in the order run: its offered rate and its latency p99.
	SeriesSweepOfferedRate = "sweep_offered_requests_per_s"
	SeriesSweepLatencyP99  = "sweep_latency_p99_s"
)

// maxSweepSteps bounds a sweep's climb and refinement together.
const maxSweepSteps = 64

// RateSweepInfo registers the rate-sweep workload.
func RateSweepInfo() Info {
	// Every http parameter but the rate it sets and the closed loop's
	// streams.
	params := slices.DeleteFunc(slices.Clone(HTTPInfo().Params), func(f scenario.Field) bool { return f.Name == "rate" || f.Name == "streams" })
	params = append(params,
		scenario.Field{Name: "start_rate", Kind: scenario.KindFloat, Default: 1000.0, HasMin: true, Min: 1,
			Doc: "offered requests/s of the first step"},
		scenario.Field{Name: "factor", Kind: scenario.KindFloat, Default: 1.5, HasMin: true, Min: 1,
			Doc: "each step of the climb multiplies the rate by this (> 1)"},
		scenario.Field{Name: "max_rate", Kind: scenario.KindFloat, Default: 1e6, HasMin: true, Min: 1,
			Doc: "the climb's last step offers exactly this; when it holds, the sweep stops there (≥ start_rate)"},
		scenario.Field{Name: "slo_p99", Kind: scenario.KindDuration, Default: 10 * time.Millisecond,
			Doc: "a step holds only with latency p99 under this (> 0), as well as ≥ 95% of its rate achieved and no error or timeout"},
		scenario.Field{Name: "refine", Kind: scenario.KindInt, Default: int64(2), HasMin: true, Min: 0,
			Doc: "bisection steps between the highest rate that held and the first that failed, after the climb"},
	)
	return Info{
		Name: "rate-sweep",
		Summary: "steps the http workload's offered rate up (start_rate × factor^k, up to max_rate, then refine bisections) " +
			"until a step misses the p99 SLO or the 95% sustained check: max_sustained_requests_per_s and that step's metrics. " +
			"Each step runs warmup+duration; at most ⌈log(max_rate/start_rate)/log(factor)⌉+1+refine steps (21 at the defaults)",
		Params: params,
		New:    func() Workload { return RateSweep{} },
		Pods:   true,
	}
}

// RateSweep is the rate-sweep workload: each step runs HTTP at one offered
// rate for the trial's warmup+duration (so server: nginx, TLS and HTTP/2
// work as in http), stepping as SweepSpec.Search does. A step holds when
// it is sustained (results.Sustained: ≥ 95% of its rate achieved), has no
// error and no timeout, and its latency p99 is under slo_p99. The result
// is MetricMaxSustainedRate with the metrics, per-second series and
// histogram of the step that held at that rate. A step that ends in an
// error (rather than a measurement) ends the sweep with that error. Its
// zero value is what `type: rate-sweep` runs.
type RateSweep struct {
	// HTTP runs each step.
	HTTP HTTP
}

var (
	_ Workload     = RateSweep{}
	_ TrialLimiter = RateSweep{}
)

// sweepStepSlack is how long one step may take beyond warmup+duration
// (server start, connections, teardown), as the runner allows one trial.
const sweepStepSlack = 30 * time.Second

// TrialLimit is the most steps the sweep can take, each warmup+duration
// plus sweepStepSlack; a sweep that cannot start says so in Run instead.
func (RateSweep) TrialLimit(env Env) time.Duration {
	spec, _, err := sweepParams(env.Params)
	n := 1
	if err == nil {
		n = spec.MaxSteps()
	}
	return time.Duration(n) * (env.Warmup + env.Duration + sweepStepSlack)
}

// Run implements Workload.
func (w RateSweep) Run(ctx context.Context, env Env) (*Result, error) {
	spec, slo, err := sweepParams(env.Params)
	if err != nil {
		return nil, err
	}
	var offered, p99s []float64
	var held *Result
	out, err := spec.Search(func(rate float64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		e := env
		e.Params = maps.Clone(env.Params)
		e.Params["rate"] = rate
		res, err := w.HTTP.Run(ctx, e)
		if cerr := ctx.Err(); cerr != nil {
			return false, cerr
		}
		if err != nil {
			return false, fmt.Errorf("rate-sweep step %d at %.6g/s: %w", len(offered)+1, rate, err)
		}
		m := res.Metrics
		p99, ok := m[results.LatencyP99]
		if !ok {
			return false, fmt.Errorf("rate-sweep step %d at %.6g/s: no %s", len(offered)+1, rate, results.LatencyP99)
		}
		offered, p99s = append(offered, rate), append(p99s, p99)
		holds := StepHolds(m, slo)
		if holds {
			// Search only ever tries above the highest rate that held.
			held = res
		}
		return holds, nil
	})
	if err != nil {
		return nil, err
	}
	r := &Result{Metrics: map[string]float64{}, Series: map[string]results.Series{}}
	if held != nil {
		maps.Copy(r.Metrics, held.Metrics)
		maps.Copy(r.Series, held.Series)
		r.Histogram = held.Histogram
		r.Missing = maps.Clone(held.Missing)
	}
	r.Metrics[MetricMaxSustainedRate] = out.Held
	r.Metrics[MetricSweepSteps] = float64(len(out.Steps))
	if out.Failed > 0 {
		r.Metrics[MetricFirstFailedRate] = out.Failed
	}
	// These two series are per step, not per second: each value covers
	// one step of warmup+duration.
	step := (env.Warmup + env.Duration).Seconds()
	r.Series[SeriesSweepOfferedRate] = results.Series{Interval: step, Values: offered}
	r.Series[SeriesSweepLatencyP99] = results.Series{Interval: step, Values: p99s}
	return r, nil
}

// StepHolds says whether a paced run's metrics m hold a rate: sustained
// (≥ 95% of the rate achieved), no error or timeout, and latency p99
// under slo.
func StepHolds(m map[string]float64, slo time.Duration) bool {
	p99, ok := m[results.LatencyP99]
	return ok && m[results.Sustained] == 1 && m[MetricErrors] == 0 && m[MetricTimeouts] == 0 && p99 < slo.Seconds()
}

// sweepParams reads a rate-sweep's parameters, the scenario's defaults
// for those absent, and checks them.
func sweepParams(p results.Params) (SweepSpec, time.Duration, error) {
	// Absent rates are left to SweepSpec's defaults; refine's scenario
	// default (2) differs from the zero value's.
	spec := SweepSpec{
		StartRate: floatParam(p, "start_rate", 0),
		Factor:    floatParam(p, "factor", 0),
		MaxRate:   floatParam(p, "max_rate", 0),
		Refine:    int(intParam(p, "refine", 2)),
	}
	spec.Normalize()
	slo := 10 * time.Millisecond
	switch v := p["slo_p99"].(type) {
	case time.Duration:
		slo = v
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return spec, 0, fmt.Errorf("rate-sweep: slo_p99: %w", err)
		}
		slo = d
	}
	if slo <= 0 {
		return spec, 0, fmt.Errorf("rate-sweep: slo_p99 must be > 0, got %s", slo)
	}
	if err := spec.Validate(); err != nil {
		return spec, 0, err
	}
	return spec, slo, nil
}

// SweepSpec says how a rate sweep steps its offered rate: a geometric
// climb from StartRate to MaxRate, then bisection. The zero value is
// StartRate 1000, Factor 1.5, MaxRate 1e6 (see Normalize), Refine 0.
type SweepSpec struct {
	// StartRate is the first step's rate; > 0.
	StartRate float64
	// Factor multiplies the rate from one step of the climb to the next; > 1.
	Factor float64
	// MaxRate caps the climb: its last step offers exactly MaxRate; ≥ StartRate.
	MaxRate float64
	// Refine is how many bisection steps follow a climb that failed,
	// between the highest rate that held and the lowest that failed; ≥ 0.
	// A climb whose first step failed is not refined.
	Refine int
}

// Normalize fills in the defaults of zero fields.
func (s *SweepSpec) Normalize() {
	if s.StartRate == 0 {
		s.StartRate = 1000
	}
	if s.Factor == 0 {
		s.Factor = 1.5
	}
	if s.MaxRate == 0 {
		s.MaxRate = 1e6
	}
}

// Validate reports a spec that cannot sweep, or would take more than 64
// steps, after Normalize.
func (s SweepSpec) Validate() error {
	s.Normalize()
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(s.StartRate > 0) || !finite(s.StartRate):
		return fmt.Errorf("rate-sweep: start_rate must be a number > 0, got %g", s.StartRate)
	case !(s.Factor > 1) || !finite(s.Factor):
		return fmt.Errorf("rate-sweep: factor must be a number > 1, got %g", s.Factor)
	case !(s.MaxRate >= s.StartRate) || !finite(s.MaxRate):
		return fmt.Errorf("rate-sweep: max_rate (%g) must be ≥ start_rate (%g)", s.MaxRate, s.StartRate)
	case s.Refine < 0:
		return fmt.Errorf("rate-sweep: refine must be ≥ 0, got %d", s.Refine)
	}
	if n := len(s.climb()) + s.Refine; n > maxSweepSteps {
		return fmt.Errorf("rate-sweep: more than %d steps from start_rate %g to max_rate %g by factor %g, then refine %d: raise factor, or lower max_rate or refine",
			maxSweepSteps, s.StartRate, s.MaxRate, s.Factor, s.Refine)
	}
	return nil
}

// MaxSteps is the most steps a sweep takes: the whole climb, then Refine.
func (s SweepSpec) MaxSteps() int {
	s.Normalize()
	return len(s.climb()) + s.Refine
}

// climb returns the climb's rates: StartRate × Factor^k while below
// MaxRate, then MaxRate. A rate within a millionth of MaxRate is MaxRate.
func (s SweepSpec) climb() []float64 {
	var rs []float64
	for k := 0; len(rs) <= maxSweepSteps; k++ {
		r := s.StartRate * math.Pow(s.Factor, float64(k))
		if r >= s.MaxRate*(1-1e-6) {
			break
		}
		rs = append(rs, r)
	}
	return append(rs, s.MaxRate)
}

// SweepStep is one step of a sweep: the rate offered and whether it held.
type SweepStep struct {
	Rate float64
	Held bool
}

// SweepOutcome is where a sweep ended.
type SweepOutcome struct {
	// Held is the highest rate that held; 0 when none did.
	Held float64
	// Failed is the lowest rate that failed; 0 when none did.
	Failed float64
	// Steps are the steps run, in order.
	Steps []SweepStep
}

// Search runs the sweep with holds telling whether a rate holds: the
// climb until a step fails or MaxRate holds, then Refine bisections
// between the highest rate that held and the lowest that failed (none
// when the first step failed). It assumes that a rate holds when a higher
// one does. An error from holds ends the search and is returned.
func (s SweepSpec) Search(holds func(rate float64) (bool, error)) (SweepOutcome, error) {
	s.Normalize()
	if err := s.Validate(); err != nil {
		return SweepOutcome{}, err
	}
	var out SweepOutcome
	try := func(r float64) (bool, error) {
		ok, err := holds(r)
		if err != nil {
			return false, err
		}
		out.Steps = append(out.Steps, SweepStep{Rate: r, Held: ok})
		if ok {
			out.Held = r
		} else {
			out.Failed = r
		}
		return ok, nil
	}
	for _, r := range s.climb() {
		ok, err := try(r)
		if err != nil {
			return out, err
		}
		if !ok {
			break
		}
	}
	if out.Failed == 0 || out.Held == 0 {
		return out, nil
	}
	for range s.Refine {
		if _, err := try((out.Held + out.Failed) / 2); err != nil {
			return out, err
		}
	}
	return out, nil
}
