package results

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
)

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

// LatencyMetrics turns a histogram of latencies in nanoseconds into the
// latency metrics in seconds (p50 to p99.99, max, mean) with its sample
// count, LatencySamples. It keeps every percentile: the caller applies
// DropThinTails.
func LatencyMetrics(h *hdrhistogram.Histogram) map[string]float64 {
	ns := func(v int64) float64 { return float64(v) / 1e9 }
	return map[string]float64{
		LatencyP50:     ns(h.ValueAtQuantile(50)),
		LatencyP90:     ns(h.ValueAtQuantile(90)),
		LatencyP99:     ns(h.ValueAtQuantile(99)),
		LatencyP999:    ns(h.ValueAtQuantile(99.9)),
		LatencyP9999:   ns(h.ValueAtQuantile(99.99)),
		LatencyMax:     ns(h.Max()),
		LatencyMean:    h.Mean() / 1e9,
		LatencySamples: float64(h.TotalCount()),
	}
}
