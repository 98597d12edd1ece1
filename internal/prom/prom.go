// Package prom reads the CPU and energy of Kubernetes pods over a trial's
// window from a Prometheus server: cAdvisor's
// container_cpu_usage_seconds_total and Kepler's
// kepler_container_joules_total, through the HTTP API's instant queries.
package prom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client queries one Prometheus server.
type Client struct {
	// URL is the server's base URL, e.g. http://prometheus.example:9090.
	URL string
	// HTTP is the HTTP client; nil is one with a 15 s timeout.
	HTTP *http.Client
}

// ErrNoSamples is returned (wrapped) when a query matches no series.
var ErrNoSamples = errors.New("no samples")

// Sample is one element of an instant vector.
type Sample struct {
	// Metric is the series' labels.
	Metric map[string]string
	// Value is the sample's value.
	Value float64
}

// Query evaluates the PromQL expression q at time at and returns the
// instant vector.
func (c *Client) Query(ctx context.Context, q string, at time.Time) ([]Sample, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	u := strings.TrimSuffix(c.URL, "/") + "/api/v1/query?" + url.Values{
		"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", c.URL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", c.URL, err)
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("prometheus %s: HTTP %d, not the query API's answer: %.200q", c.URL, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("prometheus %s: query %s: %s: %s", c.URL, q, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus %s: query %s: want a vector, got %s", c.URL, q, r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, e := range r.Data.Result {
		s, _ := e.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus %s: query %s: bad value %v", c.URL, q, e.Value[1])
		}
		out = append(out, Sample{Metric: e.Metric, Value: v})
	}
	return out, nil
}

// scalar evaluates q at at and returns the sum of its vector, or an error
// wrapping ErrNoSamples when it matches nothing.
func (c *Client) scalar(ctx context.Context, q string, at time.Time, what string) (float64, error) {
	v, err := c.Query(ctx, q, at)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return 0, fmt.Errorf("prometheus %s: %w of %s", c.URL, ErrNoSamples, what)
	}
	sum := 0.0
	for _, s := range v {
		sum += s.Value
	}
	return sum, nil
}

// rangeOf is a PromQL range of the window's length, in milliseconds.
func rangeOf(start, end time.Time) string {
	return strconv.FormatInt(end.Sub(start).Milliseconds(), 10) + "ms"
}

// selector is a label matcher list for a pod, or one of its containers.
func selector(nsLabel, podLabel, containerLabel, ns, pod, container string) string {
	s := fmt.Sprintf(`%s=%q,%s=%q`, nsLabel, ns, podLabel, pod)
	if container != "" {
		return s + fmt.Sprintf(`,%s=%q`, containerLabel, container)
	}
	return s
}

// PodCPU returns the cores that pod ns/pod (its container when not "")
// used on average over [start, end]: the increase of cAdvisor's
// container_cpu_usage_seconds_total over the window, per second. The
// pod-level series (container="") and the pause container ("POD") are
// left out, so a container is not counted twice.
func (c *Client) PodCPU(ctx context.Context, ns, pod, container string, start, end time.Time) (float64, error) {
	if !end.After(start) {
		return 0, fmt.Errorf("prometheus: empty window")
	}
	q := fmt.Sprintf(`sum(increase(container_cpu_usage_seconds_total{%s,container!="",container!="POD"}[%s]))`,
		selector("namespace", "pod", "container", ns, pod, container), rangeOf(start, end))
	v, err := c.scalar(ctx, q, end, "container_cpu_usage_seconds_total for pod "+ns+"/"+pod)
	if err != nil {
		return 0, err
	}
	return v / end.Sub(start).Seconds(), nil
}

// PodJoules returns the energy Kepler attributes to pod ns/pod (its
// container when not "") over [start, end]: the increase of
// kepler_container_joules_total (every mode) over the window.
func (c *Client) PodJoules(ctx context.Context, ns, pod, container string, start, end time.Time) (float64, error) {
	if !end.After(start) {
		return 0, fmt.Errorf("prometheus: empty window")
	}
	q := fmt.Sprintf(`sum(increase(kepler_container_joules_total{%s}[%s]))`,
		selector("container_namespace", "pod_name", "container_name", ns, pod, container), rangeOf(start, end))
	return c.scalar(ctx, q, end, "kepler_container_joules_total for pod "+ns+"/"+pod)
}
