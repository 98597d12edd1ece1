// Package metricsapi reads pods' CPU from the Kubernetes metrics API
// (metrics.k8s.io/v1beta1 PodMetrics, served by metrics-server). The API
// gives a rate over a window of its own (the pod's window and timestamp:
// the usage between metrics-server's last two scrapes of the kubelet), not
// a counter, so a trial's figure is built from the readings taken during
// its measured window whose windows lie inside it (Figure); when none
// does, the figure is missing with that reason, not made up.
package metricsapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// GroupVersion is the API the package reads.
const GroupVersion = "metrics.k8s.io/v1beta1"

// PodMetrics is the resource read: metrics.k8s.io/v1beta1 pods.
var PodMetrics = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}

// ErrNotServed says the cluster does not serve the metrics API.
var ErrNotServed = errors.New("no metrics API: install metrics-server or set probe: node / prometheus:")

// ErrNoWindow says no reading's window lies inside the measured window.
var ErrNoWindow = errors.New("no metrics API reading's window lies inside the measured window")

// Served returns nil when the cluster d discovers serves GroupVersion,
// ErrNotServed (wrapped, naming the context) when it does not or when its
// APIService does not answer, and the discovery error otherwise.
func Served(d discovery.DiscoveryInterface, context string) error {
	_, err := d.ServerResourcesForGroupVersion(GroupVersion)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("context %s: %w", context, ErrNotServed)
	case apierrors.IsServiceUnavailable(err):
		// The APIService is registered, but its server does not answer.
		return fmt.Errorf("context %s: %w (the APIService v1beta1.metrics.k8s.io is not available: %v)", context, ErrNotServed, err)
	default:
		return fmt.Errorf("context %s: discover %s: %w", context, GroupVersion, err)
	}
}

// Pod names what to read: one pod, or one container of it.
type Pod struct {
	// Namespace and Name name the pod.
	Namespace, Name string
	// Container, when set, reads only that container; else the pod's
	// containers together (the pause container is never counted).
	Container string
}

// String is ns/pod or ns/pod/container.
func (p Pod) String() string {
	if p.Container != "" {
		return p.Namespace + "/" + p.Name + "/" + p.Container
	}
	return p.Namespace + "/" + p.Name
}

// Sample is one reading: the pod's CPU rate over [Time-Window, Time].
type Sample struct {
	// Time is the end of the reading's window (the API's timestamp).
	Time time.Time
	// Window is its length (the API's window).
	Window time.Duration
	// Cores is the CPU over the window, in cores.
	Cores float64
}

// Start is the beginning of the reading's window.
func (s Sample) Start() time.Time { return s.Time.Add(-s.Window) }

// podMetrics is the part of a PodMetrics object read here.
type podMetrics struct {
	Timestamp  metav1.Time     `json:"timestamp"`
	Window     metav1.Duration `json:"window"`
	Containers []struct {
		Name  string                       `json:"name"`
		Usage map[string]resource.Quantity `json:"usage"`
	} `json:"containers"`
}

// Read returns pod's current reading from the metrics API through dyn.
// A pod the API has no reading of yet (metrics-server needs two scrapes
// of it) is an error naming it.
func Read(ctx context.Context, dyn dynamic.Interface, pod Pod) (Sample, error) {
	u, err := dyn.Resource(PodMetrics).Namespace(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return Sample{}, fmt.Errorf("get %s podmetrics %s: %w", GroupVersion, pod, err)
	}
	var pm podMetrics
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &pm); err != nil {
		return Sample{}, fmt.Errorf("podmetrics %s: %w", pod, err)
	}
	return sampleOf(pm, pod)
}

func sampleOf(pm podMetrics, pod Pod) (Sample, error) {
	s := Sample{Time: pm.Timestamp.Time, Window: pm.Window.Duration}
	found := false
	for _, c := range pm.Containers {
		if pod.Container != "" && c.Name != pod.Container {
			continue
		}
		found = true
		if q, ok := c.Usage["cpu"]; ok {
			s.Cores += q.AsApproximateFloat64()
		}
	}
	if !found {
		if pod.Container != "" {
			return Sample{}, fmt.Errorf("podmetrics %s: no container %s", pod, pod.Container)
		}
		return Sample{}, fmt.Errorf("podmetrics %s: no containers", pod)
	}
	if s.Window <= 0 || s.Time.IsZero() {
		return Sample{}, fmt.Errorf("podmetrics %s: no window (timestamp %v, window %v)", pod, s.Time, s.Window)
	}
	return s, nil
}

// Figure is a pod's CPU over a measured window, from the readings whose
// windows lie inside it.
type Figure struct {
	// Cores is the readings' CPU weighted by their windows' lengths.
	Cores float64
	// Covered is the time the readings' windows cover (at most the
	// measured window's length).
	Covered time.Duration
	// Samples is how many readings it is made of.
	Samples int
}

// FigureOf is the CPU over [start, end] from samples: each distinct
// reading (by timestamp) whose window lies wholly inside [start, end]
// counts, weighted by its window's length (metrics-server's successive
// windows abut). With none, the error is ErrNoWindow, saying what the
// readings covered.
func FigureOf(samples []Sample, start, end time.Time) (Figure, error) {
	var f Figure
	var sum float64
	var seen []time.Time
	for _, s := range samples {
		if s.Window <= 0 || slices.ContainsFunc(seen, s.Time.Equal) {
			continue
		}
		seen = append(seen, s.Time)
		if s.Start().Before(start) || s.Time.After(end) {
			continue
		}
		f.Samples++
		f.Covered += s.Window
		sum += s.Cores * s.Window.Seconds()
	}
	if f.Samples == 0 {
		// The distinct readings, the last few (those nearest the window).
		var got []string
		for _, s := range samples {
			r := fmt.Sprintf("%s+%v", s.Start().UTC().Format("15:04:05.0"), s.Window.Round(100*time.Millisecond))
			if s.Window > 0 && !slices.Contains(got, r) {
				got = append(got, r)
			}
		}
		if len(got) > 4 {
			got = append([]string{"…"}, got[len(got)-4:]...)
		}
		if len(got) == 0 {
			got = []string{"none"}
		}
		return f, fmt.Errorf("%w (window %s+%v; readings %s)", ErrNoWindow,
			start.UTC().Format("15:04:05.0"), end.Sub(start).Round(100*time.Millisecond), strings.Join(got, ", "))
	}
	f.Cores = sum / f.Covered.Seconds()
	return f, nil
}

// DefaultEvery is how often a Recorder reads: metrics-server's resolution
// is 10 s or more (15 s by default), so a reading every 2 s sees each of
// its windows.
const DefaultEvery = 2 * time.Second

// Recorder reads pods' samples every so often until Stop.
type Recorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	dyn    dynamic.Interface
	pods   []Pod

	mu      sync.Mutex
	samples map[Pod][]Sample
	errs    map[Pod]error
}

// Record starts reading pods through dyn at once and then every every
// (DefaultEvery when 0), until Stop or ctx's end.
func Record(ctx context.Context, dyn dynamic.Interface, pods []Pod, every time.Duration) *Recorder {
	if every <= 0 {
		every = DefaultEvery
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{cancel: cancel, done: make(chan struct{}), dyn: dyn, pods: pods,
		samples: map[Pod][]Sample{}, errs: map[Pod]error{}}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			r.read(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// readTimeout bounds one reading.
const readTimeout = 5 * time.Second

func (r *Recorder) read(ctx context.Context) {
	for _, p := range r.pods {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		s, err := Read(rctx, r.dyn, p)
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		if err != nil {
			r.errs[p] = err
		} else {
			r.samples[p] = append(r.samples[p], s)
		}
		r.mu.Unlock()
	}
}

// Stop takes one last reading of each pod, ends the reading and returns
// each pod's samples in the order read, and the last error of each pod
// that had one.
func (r *Recorder) Stop(ctx context.Context) (map[Pod][]Sample, map[Pod]error) {
	r.cancel()
	<-r.done
	r.read(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.samples, r.errs
}
