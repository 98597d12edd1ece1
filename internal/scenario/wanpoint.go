package scenario

import "github.com/spanperf/spanperf/internal/results"

// FirstWANPoint is the first point of the wan's sweeps (the first value of
// each list), as parameters; empty without sweeps. `spanperf up`, which
// builds one testbed, applies it.
func (s *Scenario) FirstWANPoint() results.Params { return s.wanPoints()[0] }
