package workload

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// WrkTool is wrk and its Debian package.
var WrkTool = Tool{Prog: "wrk", Pkg: "wrk"}

// WrkInfo registers the wrk driver: closed-loop HTTP/1.1 against nginx.
func WrkInfo() Info {
	return Info{
		Name:    "wrk",
		Summary: "wrk closed-loop HTTP/1.1 GETs of a fixed-size body from nginx: requests/s, latency percentiles, errors",
		Params: []scenario.Field{
			countFieldDefault("connections", "open HTTP connections (wrk -c; at least threads)", 16),
			countFieldDefault("threads", "wrk threads (wrk -t)", 2),
			sizeField("body_size", "response body bytes", 1024),
		},
		New: func() Workload { return Wrk{} },
	}
}

// countFieldDefault is countField with another default.
func countFieldDefault(name, doc string, def int64) scenario.Field {
	f := countField(name, doc)
	f.Default = def
	return f
}

// Wrk runs nginx in the server site and wrk --latency in the client site.
// wrk takes whole seconds and has no warm-up: a warmup of at least half a
// second is a separate wrk run of whole seconds before the measured one.
type Wrk struct{}

var (
	_ Workload = Wrk{}
	_ Checker  = Wrk{}
)

// Check says whether wrk and nginx are installed.
func (Wrk) Check(context.Context) error { return toolChecks(WrkTool, NginxTool) }

// Run implements Workload.
func (w Wrk) Run(ctx context.Context, env Env) (*Result, error) {
	if err := w.Check(ctx); err != nil {
		return nil, err
	}
	ng, err := StartNginx(ctx, env.Server, NginxSpec{Port: env.Port, BodySize: intParam(env.Params, "body_size", 1024), MkdirTemp: env.MkdirTemp})
	if err != nil {
		return nil, fmt.Errorf("wrk: %w", err)
	}
	defer ng.Close()
	threads := intParam(env.Params, "threads", 2)
	conns := max(intParam(env.Params, "connections", 16), threads)
	url := "http://" + env.Target.String() + NginxBodyPath
	run := func(secs int) ([]byte, error) {
		args := []string{"-t", strconv.FormatInt(threads, 10), "-c", strconv.FormatInt(conns, 10),
			"-d", strconv.Itoa(secs) + "s", "--latency", url}
		return runToolClient(ctx, env.Client, testbed.Command{Name: "wrk", Path: "wrk", Args: args},
			time.Duration(secs)*time.Second+30*time.Second)
	}
	if env.Warmup >= 500*time.Millisecond {
		if out, err := run(wholeSeconds(env.Warmup, 1)); err != nil {
			if _, perr := ParseWrk(out); perr != nil {
				return nil, fmt.Errorf("wrk warmup: %w", perr)
			}
			return nil, fmt.Errorf("wrk warmup: %w", err)
		}
	}
	secs := wholeSeconds(env.Duration, 1)
	// The warmup was a run of its own: the measured one starts now.
	env.measure(0, time.Duration(secs)*time.Second)
	srvCPU := watchCPU(ng.proc, 0, time.Duration(secs)*time.Second)
	defer srvCPU.stop()
	out, runErr := run(secs)
	res, err := ParseWrk(out)
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("wrk: %w", runErr)
		}
		return nil, fmt.Errorf("wrk: %w", err)
	}
	if s, ok := srvCPU.seconds(); ok {
		res.Metrics[results.CPUSecondsServer] = s
	}
	return res, nil
}

var (
	wrkRequests  = regexp.MustCompile(`(\d+) requests in ([0-9.]+[a-z]+),`)
	wrkRate      = regexp.MustCompile(`Requests/sec:\s*([0-9.]+)`)
	wrkLatency   = regexp.MustCompile(`(?m)^\s*Latency\s+([0-9.]+[a-z]+)\s+([0-9.]+[a-z]+)\s+([0-9.]+[a-z]+)`)
	wrkPercent   = regexp.MustCompile(`(?m)^\s*(50|75|90|99)%\s+([0-9.]+[a-z]+)`)
	wrkSocketErr = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx    = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// ParseWrk reads `wrk --latency` output: requests/s, the mean, max and
// p50/p90/p99 latencies (wrk prints no p99.9, so the tail sample rule
// has nothing to withhold, and no latency sample count: latency_samples is
// absent), errors (socket errors other
// than timeouts, plus non-2xx/3xx responses) and timeouts. Output without
// the summary (e.g. "unable to connect") is an error quoting it.
func ParseWrk(out []byte) (*Result, error) {
	text := string(out)
	rate := wrkRate.FindStringSubmatch(text)
	reqs := wrkRequests.FindStringSubmatch(text)
	lat := wrkLatency.FindStringSubmatch(text)
	if rate == nil || reqs == nil || lat == nil {
		return nil, fmt.Errorf("%w: %s", errToolReported, truncate(firstLines(text, 3), 300))
	}
	m := map[string]float64{}
	m[MetricRequestsPerS], _ = strconv.ParseFloat(rate[1], 64)
	var err error
	if m[results.DurationS], err = parseUnitDuration(reqs[2]); err != nil {
		return nil, err
	}
	if m[results.LatencyMean], err = parseUnitDuration(lat[1]); err != nil {
		return nil, err
	}
	if m[results.LatencyMax], err = parseUnitDuration(lat[3]); err != nil {
		return nil, err
	}
	names := map[string]string{"50": results.LatencyP50, "90": results.LatencyP90, "99": results.LatencyP99}
	for _, p := range wrkPercent.FindAllStringSubmatch(text, -1) {
		if name, ok := names[p[1]]; ok {
			if m[name], err = parseUnitDuration(p[2]); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := m[results.LatencyP99]; !ok {
		return nil, errors.New("no latency distribution in output (wrk run without --latency?)")
	}
	var errs, timeouts float64
	if se := wrkSocketErr.FindStringSubmatch(text); se != nil {
		for _, s := range se[1:4] {
			n, _ := strconv.ParseFloat(s, 64)
			errs += n
		}
		timeouts, _ = strconv.ParseFloat(se[4], 64)
	}
	if n := wrkNon2xx.FindStringSubmatch(text); n != nil {
		v, _ := strconv.ParseFloat(n[1], 64)
		errs += v
	}
	m[MetricErrors], m[MetricTimeouts] = errs, timeouts
	return &Result{Metrics: m}, nil
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "; ")
}
