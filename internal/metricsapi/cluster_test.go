package metricsapi_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/metricsapi"
	"github.com/spanperf/spanperf/internal/metricsapi/metricsapitest"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kubetest"
)

// Known answer, on each real cluster with metrics-server: a pod of the
// test's own burns 0.3 cores (`agent burn`) beside an idle container.
// Once the metrics API has a reading of the burn alone, readings taken
// every 2 s through a 30 s measured window give the burn container
// 0.3 ± 0.05 cores, from readings whose windows lie inside the measured
// one, and the pod within 0.02 cores more. A 5 s window, shorter than
// metrics-server's 10 s resolution, holds no reading's window: the
// figure is missing (ErrNoWindow), not made up.
func TestKnownBurn(t *testing.T) {
	env, cs := metricsapitest.Served(t)
	for _, c := range cs {
		t.Run(c.Context, func(t *testing.T) {
			t.Parallel()
			knownBurn(t, env, c)
		})
	}
}

func knownBurn(t *testing.T, env kubetest.Env, c *kube.Clients) {
	const cores = 0.3
	burn := metricsapitest.Burn(t, c, env.Image, cores)
	whole := metricsapi.Pod{Namespace: burn.Namespace, Name: burn.Name}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := metricsapi.Record(ctx, c.Dynamic, []metricsapi.Pod{burn, whole}, 0)
	start := time.Now()
	end := start.Add(30 * time.Second)
	time.Sleep(time.Until(end.Add(time.Second)))
	samples, errs := r.Stop(ctx)
	if len(errs) > 0 {
		t.Logf("reading errors: %v", errs)
	}
	for i, s := range samples[burn] {
		if i == 0 || !s.Time.Equal(samples[burn][i-1].Time) {
			t.Logf("reading %s+%v: %.4f cores", s.Start().UTC().Format("15:04:05.000"), s.Window, s.Cores)
		}
	}
	f, err := metricsapi.FigureOf(samples[burn], start, end)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := metricsapi.FigureOf(samples[whole], start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured window %s+30s: burn %.4f cores over %v from %d readings; pod %.4f", start.UTC().Format("15:04:05.000"), f.Cores, f.Covered, f.Samples, fw.Cores)
	if math.Abs(f.Cores-cores) > 0.05 {
		t.Errorf("burn %.4f cores, injected %.1f: want ±0.05", f.Cores, cores)
	}
	if f.Covered < 15*time.Second || f.Covered > 30*time.Second {
		t.Errorf("readings cover %v of a 30 s window: want 15–30 s", f.Covered)
	}
	if fw.Cores < f.Cores || fw.Cores-f.Cores > 0.02 {
		t.Errorf("pod %.4f cores, burn %.4f: want the burn and at most 0.02 more (an idle container)", fw.Cores, f.Cores)
	}
	short := end.Add(-5 * time.Second)
	if f, err := metricsapi.FigureOf(samples[burn], short, end); !errors.Is(err, metricsapi.ErrNoWindow) {
		t.Errorf("5 s window: %+v, %v; want ErrNoWindow", f, err)
	} else {
		t.Logf("5 s window: %v", err)
	}
}
