package workload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// H2loadTool is h2load and its Debian package.
var H2loadTool = Tool{Prog: "h2load", Pkg: "nghttp2-client"}

// H2loadInfo registers the h2load driver: closed-loop HTTP/2 (h2c, prior
// knowledge) against nginx.
func H2loadInfo() Info {
	return Info{
		Name:    "h2load",
		Summary: "h2load closed-loop HTTP/2 (h2c) GETs of a fixed-size body from nginx: requests/s, latency percentiles from its per-request log, errors",
		Params: []scenario.Field{
			countFieldDefault("connections", "HTTP/2 connections (h2load -c)", 16),
			countField("streams", "concurrent streams per connection (h2load -m)"),
			sizeField("body_size", "response body bytes", 1024),
		},
		New: func() Workload { return H2load{} },
	}
}

// H2load runs nginx serving h2c in the server site and h2load for the
// duration, after its own warm-up, in the client site. Latencies come from
// h2load's per-request log (--log-file), so they are exact percentiles
// with a histogram; h2load's printed summary has none.
type H2load struct{}

var (
	_ Workload = H2load{}
	_ Checker  = H2load{}
)

// Check says whether h2load and nginx are installed.
func (H2load) Check(context.Context) error { return toolChecks(H2loadTool, NginxTool) }

// Run implements Workload.
func (w H2load) Run(ctx context.Context, env Env) (*Result, error) {
	if err := w.Check(ctx); err != nil {
		return nil, err
	}
	ng, err := StartNginx(ctx, env.Server, NginxSpec{Port: env.Port, BodySize: intParam(env.Params, "body_size", 1024), HTTP2: true, MkdirTemp: env.MkdirTemp})
	if err != nil {
		return nil, fmt.Errorf("h2load: %w", err)
	}
	defer ng.Close()
	dir, err := env.mkdirTemp("h2load")
	if err != nil {
		return nil, fmt.Errorf("h2load: %w", err)
	}
	defer os.RemoveAll(dir)
	logFile := filepath.Join(dir, "requests.log")
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms" }
	args := []string{"-c", strconv.FormatInt(intParam(env.Params, "connections", 16), 10),
		"-m", strconv.FormatInt(intParam(env.Params, "streams", 1), 10),
		"-D", ms(env.Duration), "--log-file=" + logFile}
	if env.Warmup > 0 {
		args = append(args, "--warm-up-time="+ms(env.Warmup))
	}
	args = append(args, "http://"+env.Target.String()+NginxBodyPath)
	env.measure(env.Warmup, env.Duration)
	srvCPU := watchCPU(ng.proc, env.Warmup, env.Duration)
	defer srvCPU.stop()
	out, runErr := runToolClient(ctx, env.Client, testbed.Command{Name: "h2load", Path: "h2load", Args: args},
		env.Warmup+env.Duration+30*time.Second)
	log, _ := os.ReadFile(logFile)
	res, err := ParseH2load(out, log)
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("h2load: %w", runErr)
		}
		return nil, fmt.Errorf("h2load: %w", err)
	}
	if s, ok := srvCPU.seconds(); ok {
		res.Metrics[results.CPUSecondsServer] = s
	}
	return res, nil
}

var (
	h2loadRate     = regexp.MustCompile(`finished in [0-9.]+[a-z]+, ([0-9.]+) req/s`)
	h2loadRequests = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadStatus   = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
)

// ParseH2load reads h2load's output and its per-request log (lines of
// start µs, status, elapsed µs, tab-separated). requests_per_s is h2load's
// rate over the main duration; errors are failed and errored requests and
// 4xx/5xx responses; latency comes from the log. A run in which no request
// succeeded is an error quoting the output.
func ParseH2load(out, log []byte) (*Result, error) {
	text := string(out)
	rate := h2loadRate.FindStringSubmatch(text)
	reqs := h2loadRequests.FindStringSubmatch(text)
	if rate == nil || reqs == nil {
		return nil, fmt.Errorf("%w: %s", errToolReported, truncate(firstLines(text, 3), 300))
	}
	n := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	if n(reqs[4]) == 0 {
		msg := "no request succeeded"
		if !strings.Contains(text, "Application protocol: h2") {
			msg += " (no HTTP/2 connection was made)"
		}
		return nil, fmt.Errorf("%w: %s: %s", errToolReported, msg, truncate(reqs[0], 200))
	}
	m := map[string]float64{
		MetricRequestsPerS: n(rate[1]),
		MetricErrors:       n(reqs[5]) + n(reqs[6]),
		MetricTimeouts:     n(reqs[7]),
	}
	if st := h2loadStatus.FindStringSubmatch(text); st != nil {
		m[MetricErrors] += n(st[3]) + n(st[4])
	}
	h := newLatencyHist()
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) != 3 {
			continue
		}
		us, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("request log line %q: %w", sc.Text(), err)
		}
		if err := h.RecordValue(max(us, 1) * 1000); err != nil {
			return nil, fmt.Errorf("request log: %w", err)
		}
	}
	if h.TotalCount() == 0 {
		return nil, errors.New("request log is empty")
	}
	lat, enc, err := histogramMetrics(h)
	if err != nil {
		return nil, err
	}
	for k, v := range lat {
		m[k] = v
	}
	return &Result{Metrics: m, Histogram: enc, Missing: results.DropThinTails(m, nil)}, nil
}
