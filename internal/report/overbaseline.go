package report

import (
	"maps"
	"slices"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// pacedParam is the parameter of an offered rate: a point that has it is
// paced, and its datapaths carry the same load.
const pacedParam = "rate"

// withOverBaseline returns recs (the records of one run) with
// results.CPUCoresOverBaseline in every successful paced trial: its
// results.CPUCoresPath less the median CPUCoresPath of baseline's successful
// trials at the same workload and parameters. Records that gain the metric
// are copies with their own Metrics map; recs is not changed. A trial
// without CPUCoresPath, or whose point has no baseline trial with it, does
// not gain it.
func withOverBaseline(recs []results.Record, baseline string) []results.Record {
	base := map[string][]float64{}
	for _, r := range recs {
		if r.Datapath != baseline || r.Error != "" {
			continue
		}
		if _, ok := r.Params[pacedParam]; !ok {
			continue
		}
		if v, ok := r.Metrics[results.CPUCoresPath]; ok {
			k := r.Workload + "|" + r.Params.Key()
			base[k] = append(base[k], v)
		}
	}
	if len(base) == 0 {
		return recs
	}
	med := map[string]float64{}
	for k, v := range base {
		med[k] = stats.Summarize(v).Median
	}
	out := slices.Clone(recs)
	for i, r := range out {
		if r.Error != "" {
			continue
		}
		m, ok := med[r.Workload+"|"+r.Params.Key()]
		path, pok := r.Metrics[results.CPUCoresPath]
		if !ok || !pok {
			continue
		}
		out[i].Metrics = maps.Clone(r.Metrics)
		out[i].Metrics[results.CPUCoresOverBaseline] = path - m
	}
	return out
}

// runsWithOverBaseline applies withOverBaseline to each run's records.
func runsWithOverBaseline(runs []Run, baseline string) []Run {
	out := slices.Clone(runs)
	for i := range out {
		out[i].Records = withOverBaseline(out[i].Records, baseline)
	}
	return out
}
