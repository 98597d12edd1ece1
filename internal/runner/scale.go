package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Metrics of a sweep of the number of sites, the same in every record of
// a (repetition, datapath, sites) group.
const (
	// DatapathSetupSeconds is how long the group's datapath took to set up.
	DatapathSetupSeconds = "datapath_setup_s"
	// IdleCPUCoresPerSite and IdleRSSBytesPerSite are the CPU and the
	// resident memory of the datapath's processes, idle (before the first
	// trial, for scaleIdle), divided by the number of sites.
	IdleCPUCoresPerSite = "idle_cpu_cores_per_site"
	IdleRSSBytesPerSite = "idle_rss_bytes_per_site"
)

// scaleIdle is how long the datapath's processes are watched idle.
const scaleIdle = time.Second

// scale is what a group of a sites sweep adds to its records.
type scale struct {
	metrics map[string]float64
	missing map[string]string
}

// scaleOf measures, when s sweeps its number of sites, the group's setup
// time and its datapath's processes idle; nil otherwise.
func scaleOf(ctx context.Context, s *scenario.Scenario, tb testbed.Testbed, link *datapath.Link, setup time.Duration) *scale {
	if len(s.SiteCounts) == 0 {
		return nil
	}
	sc := &scale{metrics: map[string]float64{DatapathSetupSeconds: setup.Seconds()}, missing: map[string]string{}}
	n := float64(len(tb.Sites()))
	var pids []int
	for _, c := range link.Components {
		if c.PID > 0 {
			pids = append(pids, c.PID)
		}
	}
	if len(pids) == 0 {
		// A kernel-only datapath (native, vxlan): no process to cost.
		sc.metrics[IdleCPUCoresPerSite], sc.metrics[IdleRSSBytesPerSite] = 0, 0
		return sc
	}
	cpu := func() (float64, error) {
		var sum float64
		for _, pid := range pids {
			v, err := probe.TreeCPUSeconds(pid)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	c0, err0 := cpu()
	t0 := time.Now()
	select {
	case <-time.After(scaleIdle):
	case <-ctx.Done():
	}
	c1, err1 := cpu()
	if err := firstErr(err0, err1); err != nil {
		sc.missing[IdleCPUCoresPerSite] = fmt.Sprintf("datapath processes: %v", err)
	} else {
		sc.metrics[IdleCPUCoresPerSite] = (c1 - c0) / time.Since(t0).Seconds() / n
	}
	var rss float64
	for _, pid := range pids {
		v, err := probe.TreeRSSBytes(pid)
		if err != nil {
			sc.missing[IdleRSSBytesPerSite] = fmt.Sprintf("datapath processes: %v", err)
			return sc
		}
		rss += v
	}
	sc.metrics[IdleRSSBytesPerSite] = rss / n
	return sc
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// addTo adds the group's figures to rec.
func (sc *scale) addTo(rec *results.Record) {
	if sc == nil {
		return
	}
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	for k, v := range sc.metrics {
		rec.Metrics[k] = v
	}
	for k, v := range sc.missing {
		if rec.Missing == nil {
			rec.Missing = map[string]string{}
		}
		rec.Missing[k] = v
	}
}
