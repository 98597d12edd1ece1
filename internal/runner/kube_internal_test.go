package runner

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/prom/promtest"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// TestPodsProbedFromPrometheus: on Kubernetes sites with prometheus: URL,
// a trial's datapath pods get the CPU a real Prometheus scraped for them
// (an exporter whose counters grow at known rates: the router pod at 0.6
// cores, the gateway's container at 0.15), cpu_cores_datapath is their
// sum, energy is Kepler's, and the node figures are missing with the
// reason.
func TestPodsProbedFromPrometheus(t *testing.T) {
	t0 := time.Now()
	exp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := time.Since(t0).Seconds()
		fmt.Fprintf(w, "container_cpu_usage_seconds_total{namespace=\"sk\",pod=\"router-0\",container=\"router\"} %f\n", 0.6*s)
		fmt.Fprintf(w, "container_cpu_usage_seconds_total{namespace=\"gw\",pod=\"gw-0\",container=\"gateway\"} %f\n", 0.15*s)
		fmt.Fprintf(w, "container_cpu_usage_seconds_total{namespace=\"gw\",pod=\"gw-0\",container=\"sidecar\"} %f\n", 0.9*s)
		fmt.Fprintf(w, "kepler_container_joules_total{container_namespace=\"sk\",pod_name=\"router-0\",container_name=\"router\",mode=\"dynamic\"} %f\n", 6*s)
		fmt.Fprintf(w, "kepler_container_joules_total{container_namespace=\"gw\",pod_name=\"gw-0\",container_name=\"gateway\",mode=\"dynamic\"} %f\n", 2*s)
	}))
	defer exp.Close()
	url := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	promtest.Scraped(t, url)
	start := time.Now().Add(time.Second)
	end := start.Add(5 * time.Second)
	time.Sleep(time.Until(end.Add(1500 * time.Millisecond)))
	s := &scenario.Scenario{Kube: scenario.Kube{Prometheus: url, Probe: scenario.ProbeNone}, Duration: 5 * time.Second}
	comps := []results.Component{
		{Name: "skupper-router@west", Role: "router", Namespace: "sk", Pod: "router-0"},
		{Name: "gateway@east", Role: "gateway", Namespace: "gw", Pod: "gw-0", Container: "gateway"},
		{Name: "kernel", Role: "kernel"},
	}
	pd := kubeProbed(context.Background(), s, comps, start, end, nil)
	rec := results.Record{Metrics: map[string]float64{}}
	pd.addTo(&rec)
	for name, want := range map[string]float64{
		results.For(results.CPUCores, "skupper-router@west"): 0.6,
		results.For(results.CPUCores, "gateway@east"):        0.15,
		results.CPUCoresDatapath:                             0.75,
		results.EnergyJoules:                                 8 * 5,
	} {
		if got, ok := rec.Metrics[name]; !ok || math.Abs(got-want) > 0.03*want {
			t.Errorf("%s = %v (present %v), want %v ± 3%%", name, got, ok, want)
		}
	}
	for _, name := range []string{results.CPUCoresBusy, results.CPUCoresPath, results.CPUCoresSoftirq} {
		if why := rec.Missing[name]; !strings.Contains(why, "probe: node") {
			t.Errorf("missing[%s] = %q, want the reason naming probe: node", name, why)
		}
	}
	// A pod Prometheus has no series of: missing, naming it; the sum too.
	pd = kubeProbed(context.Background(), s, append(comps, results.Component{Name: "ztunnel@east", Namespace: "istio-system", Pod: "ztunnel-x"}), start, end, nil)
	rec = results.Record{Metrics: map[string]float64{}}
	pd.addTo(&rec)
	if why := rec.Missing[results.For(results.CPUCores, "ztunnel@east")]; !strings.Contains(why, "istio-system/ztunnel-x") {
		t.Errorf("missing pod: %q", why)
	}
	if _, ok := rec.Metrics[results.CPUCoresDatapath]; ok {
		t.Error("cpu_cores_datapath given though a component's CPU is missing")
	}
}
