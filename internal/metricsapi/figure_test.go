package metricsapi

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFigureOf: readings whose windows lie inside the measured window
// count, weighted by their windows; a reading read twice counts once;
// windows that start before or end after the measured one do not; with
// none inside, the figure is missing (ErrNoWindow) naming the readings.
func TestFigureOf(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	at := func(endS, winS, cores float64) Sample {
		return Sample{Time: t0.Add(time.Duration(endS * float64(time.Second))), Window: time.Duration(winS * float64(time.Second)), Cores: cores}
	}
	for _, tc := range []struct {
		name       string
		samples    []Sample
		start, end float64
		want       float64
		covered    time.Duration
		n          int
		err        bool
	}{
		{name: "one inside", samples: []Sample{at(12, 10, 0.3)}, start: 0, end: 30, want: 0.3, covered: 10 * time.Second, n: 1},
		{name: "weighted by window", samples: []Sample{at(12, 10, 0.3), at(27, 15, 0.6)}, start: 0, end: 30,
			want: (0.3*10 + 0.6*15) / 25, covered: 25 * time.Second, n: 2},
		{name: "read twice counts once", samples: []Sample{at(12, 10, 0.3), at(12, 10, 0.3), at(22, 10, 0.5), at(22, 10, 0.5)}, start: 0, end: 30,
			want: 0.4, covered: 20 * time.Second, n: 2},
		{name: "straddling windows left out", samples: []Sample{at(3, 10, 9), at(14, 11, 0.3), at(35, 21, 9)}, start: 0, end: 30,
			want: 0.3, covered: 11 * time.Second, n: 1},
		{name: "edges inside", samples: []Sample{at(10, 10, 0.2), at(30, 20, 0.5)}, start: 0, end: 30,
			want: (0.2*10 + 0.5*20) / 30, covered: 30 * time.Second, n: 2},
		{name: "short trial, long resolution", samples: []Sample{at(-2, 10, 0.3), at(8, 10, 0.3)}, start: 0, end: 5, err: true},
		{name: "no readings", start: 0, end: 5, err: true},
		{name: "zero window ignored", samples: []Sample{{Time: t0.Add(2 * time.Second), Cores: 1}}, start: 0, end: 5, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end := t0.Add(time.Duration(tc.start*float64(time.Second))), t0.Add(time.Duration(tc.end*float64(time.Second)))
			f, err := FigureOf(tc.samples, start, end)
			if tc.err {
				if !errors.Is(err, ErrNoWindow) || !strings.Contains(err.Error(), "window 01:00:00.0+") {
					t.Fatalf("FigureOf = %+v, %v; want ErrNoWindow naming the window", f, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(f.Cores-tc.want) > 1e-9 || f.Covered != tc.covered || f.Samples != tc.n {
				t.Errorf("FigureOf = %+v; want %.4f cores over %v from %d", f, tc.want, tc.covered, tc.n)
			}
		})
	}
}

// TestSampleOf: a pod's reading is its containers' CPU together, or one
// container's; a missing container and a reading without a window are
// errors naming the pod.
func TestSampleOf(t *testing.T) {
	pm := podMetrics{Timestamp: metav1.NewTime(time.Unix(1000, 0)), Window: metav1.Duration{Duration: 10 * time.Second}}
	for _, c := range []struct{ name, cpu string }{{"burn", "301m"}, {"idle", "250u"}} {
		pm.Containers = append(pm.Containers, struct {
			Name  string                       `json:"name"`
			Usage map[string]resource.Quantity `json:"usage"`
		}{c.name, map[string]resource.Quantity{"cpu": resource.MustParse(c.cpu), "memory": resource.MustParse("10Mi")}})
	}
	s, err := sampleOf(pm, Pod{Namespace: "ns", Name: "p"})
	if err != nil || math.Abs(s.Cores-0.30125) > 1e-9 || s.Window != 10*time.Second || !s.Start().Equal(time.Unix(990, 0)) {
		t.Errorf("pod: %+v, %v", s, err)
	}
	if s, err = sampleOf(pm, Pod{Namespace: "ns", Name: "p", Container: "burn"}); err != nil || math.Abs(s.Cores-0.301) > 1e-9 {
		t.Errorf("container: %+v, %v", s, err)
	}
	if _, err = sampleOf(pm, Pod{Namespace: "ns", Name: "p", Container: "nope"}); err == nil || !strings.Contains(err.Error(), "ns/p/nope") {
		t.Errorf("missing container: %v", err)
	}
	pm.Window = metav1.Duration{}
	if _, err = sampleOf(pm, Pod{Namespace: "ns", Name: "p"}); err == nil || !strings.Contains(err.Error(), "ns/p") {
		t.Errorf("no window: %v", err)
	}
}
