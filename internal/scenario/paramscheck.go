package scenario

import (
	"errors"

	"github.com/spanperf/spanperf/internal/results"
)

// ParamsChecker is an optional Catalog capability: Validate asks it
// whether each point of a workload's matrix makes sense, beyond each
// value's kind (two keys that exclude each other). An error that is (or
// joins) FieldErrors is placed at their keys, below the workload entry.
type ParamsChecker interface {
	// CheckParams returns nil, or what is wrong with params, one point
	// of workload's matrix (defaults applied).
	CheckParams(workload string, params results.Params) error
}

// paramsProblems asks cat (a ParamsChecker) about each point of w, the
// workload at path, and reports the first point's problems.
func paramsProblems(cat Catalog, path string, w WorkloadSpec) []problem {
	pc, ok := cat.(ParamsChecker)
	if !ok {
		return nil
	}
	for _, pt := range w.points() {
		var ps []problem
		for _, e := range flatten(pc.CheckParams(w.Type, pt.Params)) {
			if fe := (*FieldError)(nil); errors.As(e, &fe) {
				ps = append(ps, problem{subject: join(path, fe.Key), msg: fe.Msg})
			} else {
				ps = append(ps, problem{subject: path, msg: e.Error()})
			}
		}
		if len(ps) > 0 {
			return ps
		}
	}
	return nil
}
