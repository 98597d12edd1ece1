package results

import "fmt"

// TailMinSamples is the fewest latency samples a tail percentile is reported
// from: a 99.9th percentile from fewer than 1,000 samples is not a
// percentile but one of the few slowest, so it is reported as missing.
var TailMinSamples = []struct {
	// Metric is the percentile's name.
	Metric string
	// Min is the sample count it needs.
	Min int
}{{LatencyP999, 1000}, {LatencyP9999, 10000}}

// DropThinTails deletes from m each tail percentile of TailMinSamples that
// m[LatencySamples] is too few for, and records why in missing (made when
// nil and needed), which it returns. Applying it twice changes nothing. A
// map without LatencySamples is left as it is: its producer could not
// count its samples.
func DropThinTails(m map[string]float64, missing map[string]string) map[string]string {
	n, ok := m[LatencySamples]
	if !ok {
		return missing
	}
	for _, t := range TailMinSamples {
		if _, had := m[t.Metric]; !had || n >= float64(t.Min) {
			continue
		}
		delete(m, t.Metric)
		if missing == nil {
			missing = map[string]string{}
		}
		missing[t.Metric] = fmt.Sprintf("%.0f samples, needs ≥ %d", n, t.Min)
	}
	return missing
}
