package prom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/prom/promtest"
)

// exporter serves counters that grow at known rates since t0, as cAdvisor
// and Kepler would: pod n1/p1's containers c1 at 0.25 cores and c2 at
// 0.10, the pod-level series (container="") at their sum and the pause
// container at 0.01; Kepler 3 W dynamic and 1 W idle for c1.
func exporter(t *testing.T, t0 time.Time) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := time.Since(t0).Seconds()
		fmt.Fprintf(w, "# TYPE container_cpu_usage_seconds_total counter\n")
		for _, c := range []struct {
			name string
			rate float64
		}{{"c1", 0.25}, {"c2", 0.10}, {"", 0.35}, {"POD", 0.01}} {
			fmt.Fprintf(w, "container_cpu_usage_seconds_total{namespace=\"n1\",pod=\"p1\",container=%q} %f\n", c.name, 100+c.rate*s)
		}
		fmt.Fprintf(w, "# TYPE kepler_container_joules_total counter\n")
		fmt.Fprintf(w, "kepler_container_joules_total{container_namespace=\"n1\",pod_name=\"p1\",container_name=\"c1\",mode=\"dynamic\"} %f\n", 50+3*s)
		fmt.Fprintf(w, "kepler_container_joules_total{container_namespace=\"n1\",pod_name=\"p1\",container_name=\"c1\",mode=\"idle\"} %f\n", 10+1*s)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestKnownRatesThroughRealPrometheus: counters that grow at known rates,
// scraped by a real Prometheus, read back over a window: the pod's CPU is
// its containers' (the pod-level and pause series left out), one
// container's alone, and Kepler's joules over the window.
func TestKnownRatesThroughRealPrometheus(t *testing.T) {
	t0 := time.Now()
	exp := exporter(t, t0)
	url := promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
	c := &Client{URL: url}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// The window starts once Prometheus has scraped the exporter: the
	// figures need scrapes that cover the window.
	promtest.Scraped(t, url)
	start := time.Now().Add(time.Second)
	end := start.Add(5 * time.Second)
	time.Sleep(time.Until(end.Add(1500 * time.Millisecond)))
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.03*want {
			t.Errorf("%s = %.4f, want %.4f ± 3%%", what, got, want)
		}
	}
	cpu, err := c.PodCPU(ctx, "n1", "p1", "", start, end)
	if err != nil {
		t.Fatal(err)
	}
	near("pod cores", cpu, 0.35)
	one, err := c.PodCPU(ctx, "n1", "p1", "c1", start, end)
	if err != nil {
		t.Fatal(err)
	}
	near("container c1 cores", one, 0.25)
	j, err := c.PodJoules(ctx, "n1", "p1", "", start, end)
	if err != nil {
		t.Fatal(err)
	}
	near("joules", j, 4*5)
	if _, err := c.PodCPU(ctx, "n1", "nope", "", start, end); !errors.Is(err, ErrNoSamples) || !strings.Contains(err.Error(), "n1/nope") {
		t.Errorf("absent pod: %v, want ErrNoSamples naming n1/nope", err)
	}
	if _, err := c.Query(ctx, "sum(", end); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("bad query: %v, want Prometheus's bad_data error", err)
	}
}

// TestNotPrometheus: a URL that does not answer, or answers with something
// that is not the query API, gives an error naming the URL.
func TestNotPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>hi</html>") }))
	defer html.Close()
	dead := fmt.Sprintf("http://127.0.0.1:%d", promtest.FreePort(t))
	for _, u := range []string{html.URL, dead} {
		_, err := (&Client{URL: u}).PodCPU(ctx, "n", "p", "", time.Now().Add(-time.Second), time.Now())
		if err == nil || !strings.Contains(err.Error(), u) {
			t.Errorf("%s: %v, want an error naming it", u, err)
		}
	}
}
