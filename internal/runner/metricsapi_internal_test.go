package runner

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/metricsapi/metricsapitest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// TestPodsProbedFromMetricsAPI: on the real clusters with metrics-server,
// without probe: node or prometheus:, a trial's component pod gets the
// CPU the metrics API read for it during the measured window: a pod of
// the test's own burning 0.3 cores gives cpu_cores{burn@east} = 0.3 ±
// 0.05 over a 25 s trial, cpu_cores_datapath the same, and a warning
// saying the figure is the metrics API's and what it covers; energy is
// missing with the reason. A 5 s trial holds no reading's window (the
// resolution is 10 s): the figure is missing with that reason, as is a
// component whose pod does not exist (naming it), and the sum. Without
// the metrics API the reason says what to install or set.
func TestPodsProbedFromMetricsAPI(t *testing.T) {
	env, cs := metricsapitest.Served(t)
	burn := metricsapitest.Burn(t, cs[0], env.Image, 0.3)
	ma := metricsAPIOf(cs)
	last := cs[len(cs)-1]
	comps := []results.Component{
		{Name: "burn@east", Role: "router", Context: cs[0].Context, Namespace: burn.Namespace, Pod: burn.Name, Container: burn.Container},
		{Name: "kernel", Role: "kernel"},
	}
	ghost := results.Component{Name: "ghost@west", Role: "gateway", Context: last.Context, Namespace: burn.Namespace, Pod: "ghost"}
	s := &scenario.Scenario{Kube: scenario.Kube{Probe: scenario.ProbeNone}, Duration: 25 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	trial := func(comps []results.Component, length time.Duration) results.Record {
		mr := ma.start(ctx, comps)
		start := time.Now().Add(500 * time.Millisecond)
		end := start.Add(length)
		time.Sleep(time.Until(end.Add(300 * time.Millisecond)))
		pd := kubeProbed(ctx, s, comps, start, end, mr)
		rec := results.Record{Metrics: map[string]float64{}}
		pd.addTo(&rec)
		return rec
	}

	rec := trial(comps, 25*time.Second)
	got, ok := rec.Metrics[results.For(results.CPUCores, "burn@east")]
	t.Logf("25 s trial: burn@east %.4f cores (present %v); warnings %q; missing %v", got, ok, rec.Warnings, rec.Missing)
	if !ok || math.Abs(got-0.3) > 0.05 {
		t.Errorf("cpu_cores{burn@east} = %v (present %v), want 0.3 ± 0.05", got, ok)
	}
	if sum := rec.Metrics[results.CPUCoresDatapath]; sum != got {
		t.Errorf("cpu_cores_datapath = %v, want the one component's %v", sum, got)
	}
	if len(rec.Warnings) != 1 || !strings.Contains(rec.Warnings[0], "metrics API") || !strings.Contains(rec.Warnings[0], "burn@east") {
		t.Errorf("warnings %q: want one saying the CPU is the metrics API's", rec.Warnings)
	}
	if why := rec.Missing[results.EnergyJoules]; !strings.Contains(why, "metrics API") {
		t.Errorf("missing[energy_joules] = %q", why)
	}

	rec = trial(append(comps, ghost), 5*time.Second)
	t.Logf("5 s trial: missing %v", rec.Missing)
	if _, ok := rec.Metrics[results.For(results.CPUCores, "burn@east")]; ok {
		t.Error("a 5 s trial got a figure from 10 s windows")
	}
	if why := rec.Missing[results.For(results.CPUCores, "burn@east")]; !strings.Contains(why, "no metrics API reading's window lies inside the measured window") {
		t.Errorf("missing[cpu_cores{burn@east}] = %q", why)
	}
	if why := rec.Missing[results.For(results.CPUCores, "ghost@west")]; !strings.Contains(why, burn.Namespace+"/ghost") || !strings.Contains(why, "not found") {
		t.Errorf("missing[cpu_cores{ghost@west}] = %q, want it naming the pod and not found", why)
	}
	if _, ok := rec.Metrics[results.CPUCoresDatapath]; ok || rec.Missing[results.CPUCoresDatapath] == "" {
		t.Error("cpu_cores_datapath given though a component's CPU is missing")
	}

	pd := kubeProbed(ctx, s, comps, time.Now().Add(-time.Second), time.Now(), nil)
	rec = results.Record{Metrics: map[string]float64{}}
	pd.addTo(&rec)
	if why := rec.Missing[results.For(results.CPUCores, "burn@east")]; !strings.Contains(why, "install metrics-server or set probe: node / prometheus:") {
		t.Errorf("no metrics API: missing[cpu_cores{burn@east}] = %q", why)
	}
}
