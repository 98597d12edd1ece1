// Command http compares spanperf's built-in http generator with wrk
// (HTTP/1.1) and h2load (HTTP/2, h2c) against the same nginx on one native
// two-site testbed, interleaved, with repetitions. For each protocol it
// measures, per repetition, each side's closed-loop rate over the same
// connections and its client CPU seconds per 100k requests; then it sweeps
// the built-in generator's offered rate (open loop, wrk2 correction) up
// from half the standard tool's rate to find the highest rate it sustains
// (≥ 95% achieved, no errors, p99 under the SLO). It prints medians and
// ratios. Run: bench/http.sh
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/bench/internal/benchkit"
	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

var (
	reps      = flag.Int("reps", 5, "repetitions of the closed-loop comparison (each runs both sides, in alternating order)")
	dur       = flag.Duration("duration", 5*time.Second, "measured time per side, repetition and sweep step")
	conns     = flag.Int("connections", 16, "connections, for every side")
	bodySize  = flag.Int("body-size", 1024, "response body bytes")
	threads   = flag.Int("wrk-threads", 1, "wrk threads (h2load runs one thread)")
	sweepReps = flag.Int("sweep-reps", 3, "rate sweeps per protocol (0: skip the sweep)")
	factor    = flag.Float64("sweep-factor", 1.1, "rate step of the sweep")
	slo       = flag.Duration("slo-p99", 10*time.Millisecond, "p99 latency a sweep step must stay under")
	protos    = flag.String("protocols", "http1,http2", "which comparisons: http1 (vs wrk), http2 (vs h2load)")
)

// sample is one client run.
type sample struct {
	rate     float64 // requests/s
	cpu      float64 // client CPU seconds
	requests float64 // requests completed in the client's run
}

func (s sample) cpuPer100k() float64 { return s.cpu / s.requests * 1e5 }

const (
	portHTTP1 = 8080
	portH2C   = 8081
)

func main() {
	agent.RunIfChild()
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	for _, t := range []workload.Tool{workload.WrkTool, workload.H2loadTool, workload.NginxTool} {
		if err := t.Check(); err != nil {
			return fmt.Errorf("%v; `make bench` installs it", err)
		}
	}
	ctx := context.Background()
	tb, err := netns.New(ctx, netns.Spec{Run: runner.NewID()})
	if err != nil {
		return err
	}
	defer tb.Close()
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	for _, p := range []struct {
		port int
		h2   bool
	}{{portHTTP1, false}, {portH2C, true}} {
		ng, err := workload.StartNginx(ctx, b, workload.NginxSpec{Port: p.port, BodySize: int64(*bodySize), HTTP2: p.h2})
		if err != nil {
			return err
		}
		defer ng.Close()
	}
	fmt.Printf("spanperf http vs wrk and h2load: native testbed, nginx (1 worker), %d connections, %d B bodies, %d reps × %s, host %s\n\n",
		*conns, *bodySize, *reps, *dur, benchkit.HostLine())
	for _, proto := range splitList(*protos) {
		var them string
		var theirRun func() (sample, error)
		var port int
		switch proto {
		case "http1":
			them, port = fmt.Sprintf("wrk -t%d", *threads), portHTTP1
			theirRun = func() (sample, error) { return wrkRun(a, b) }
		case "http2":
			them, port = "h2load -m1", portH2C
			theirRun = func() (sample, error) { return h2loadRun(a, b) }
		default:
			return fmt.Errorf("-protocols: %q is neither http1 nor http2", proto)
		}
		var ours, theirs []sample
		for r := 0; r < *reps; r++ {
			o := func() error {
				s, err := ourRun(a, b, proto, port, 0)
				ours = append(ours, s.sample)
				return err
			}
			t := func() error {
				s, err := theirRun()
				theirs = append(theirs, s)
				return err
			}
			if err := benchkit.Alternate(r, o, t); err != nil {
				return err
			}
		}
		fmt.Printf("%s, closed loop, %d connections\n", proto, *conns)
		line("spanperf http", ours)
		line(them, theirs)
		ro, rt := median(ours, sample.rateOf), median(theirs, sample.rateOf)
		co, ct := median(ours, sample.cpuPer100k), median(theirs, sample.cpuPer100k)
		fmt.Printf("  ratio (median): rate %.2f×, client CPU per request %.2f×\n", ro/rt, co/ct)
		if *sweepReps > 0 {
			var held, heldCPU []float64
			for r := 0; r < *sweepReps; r++ {
				h, cpu, steps, err := sweep(a, b, proto, port, rt/2)
				if err != nil {
					return err
				}
				held, heldCPU = append(held, h), append(heldCPU, cpu)
				fmt.Printf("  sweep %d: %s\n", r+1, steps)
			}
			hm := benchkit.Median(held)
			fmt.Printf("  spanperf http paced: highest sustained rate (≥95%% achieved, 0 errors, p99 < %s) median %.0f req/s (%s), client CPU s per 100k at that rate %.2f\n",
				*slo, hm, benchkit.FmtList(held, 1), benchkit.Median(heldCPU))
			fmt.Printf("  ratio (median): highest sustained paced rate / %s closed-loop rate %.2f×, client CPU per request %.2f×\n",
				them, hm/rt, benchkit.Median(heldCPU)/ct)
		}
		fmt.Println()
	}
	return nil
}

func (s sample) rateOf() float64 { return s.rate }

func median(ss []sample, f func(sample) float64) float64 {
	var xs []float64
	for _, s := range ss {
		xs = append(xs, f(s))
	}
	return benchkit.Median(xs)
}

func line(name string, ss []sample) {
	var rates []float64
	for _, s := range ss {
		rates = append(rates, s.rate)
	}
	fmt.Printf("  %-16s %9.0f req/s   client CPU s per 100k requests %.2f   per rep (k req/s): %s\n",
		name, median(ss, sample.rateOf), median(ss, sample.cpuPer100k), benchkit.FmtList(rates, 1e3))
}

// ourResult is one built-in client run: its sample and the agent's metrics.
type ourResult struct {
	sample
	metrics map[string]float64
}

// ourRun runs `spanperf agent http` in a; rate 0 is closed loop. The CPU
// is the whole process's (start-up included), as for the standard tools.
func ourRun(a, b *netns.Site, proto string, port int, rate float64) (ourResult, error) {
	exe, _ := os.Executable()
	warm := "0s"
	if rate > 0 {
		warm = "1s"
	}
	out, cpu, err := benchkit.InSite(a, exe, "agent", "http", "--target", fmt.Sprintf("%s:%d", b.Addr(), port),
		"--protocol", proto, "--path", workload.NginxBodyPath, "--connections", strconv.Itoa(*conns),
		"--body-size", strconv.Itoa(*bodySize), "--duration", dur.String(), "--warmup", warm,
		"--rate", strconv.FormatFloat(rate, 'f', -1, 64))
	if err != nil {
		return ourResult{}, err
	}
	var res agent.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return ourResult{}, fmt.Errorf("agent http output: %w", err)
	}
	m := res.Metrics
	if rate > 0 {
		// A paced run has a warm-up: count the client's own CPU over the
		// measured window only.
		cpu = m["cpu_seconds_client"]
	}
	return ourResult{sample{rate: m["requests_per_s"], cpu: cpu, requests: m["requests"]}, m}, nil
}

// sweep climbs the built-in client's offered rate by -sweep-factor from
// start, as the rate-sweep workload does (workload.SweepSpec, no
// refinement, held by workload.StepHolds), until a step fails, and returns
// the highest rate that held, the client CPU s per 100k requests at it,
// and the steps as text.
func sweep(a, b *netns.Site, proto string, port int, start float64) (float64, float64, string, error) {
	var heldCPU float64
	steps := ""
	spec := workload.SweepSpec{StartRate: start, Factor: *factor, MaxRate: start * 6}
	out, err := spec.Search(func(r float64) (bool, error) {
		res, err := ourRun(a, b, proto, port, r)
		if err != nil {
			return false, err
		}
		m := res.metrics
		ok := workload.StepHolds(m, *slo)
		steps += fmt.Sprintf("%.0f→%.0f p99 %.2fms %s; ", r, m["requests_per_s"], m["latency_p99_s"]*1e3, map[bool]string{true: "held", false: "FAILED"}[ok])
		if ok {
			heldCPU = res.cpuPer100k()
		}
		return ok, nil
	})
	return out.Held, heldCPU, steps, err
}

func wrkRun(a, b *netns.Site) (sample, error) {
	out, cpu, err := benchkit.InSite(a, "wrk", "-t", strconv.Itoa(*threads), "-c", strconv.Itoa(*conns),
		"-d", strconv.Itoa(int(dur.Seconds()))+"s", "--latency", fmt.Sprintf("http://%s:%d%s", b.Addr(), portHTTP1, workload.NginxBodyPath))
	if err != nil {
		return sample{}, err
	}
	res, err := workload.ParseWrk(out)
	if err != nil {
		return sample{}, err
	}
	if res.Metrics["errors"] > 0 {
		return sample{}, errors.New("wrk reported errors")
	}
	m := res.Metrics
	return sample{rate: m["requests_per_s"], cpu: cpu, requests: m["requests_per_s"] * m["duration_s"]}, nil
}

var h2Requests = regexp.MustCompile(`requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded`)
var h2Rate = regexp.MustCompile(`finished in [0-9.]+m?s, ([0-9.]+) req/s`)

func h2loadRun(a, b *netns.Site) (sample, error) {
	out, cpu, err := benchkit.InSite(a, "h2load", "-c", strconv.Itoa(*conns), "-m", "1",
		"-D", strconv.Itoa(int(dur.Seconds())), fmt.Sprintf("http://%s:%d%s", b.Addr(), portH2C, workload.NginxBodyPath))
	if err != nil {
		return sample{}, err
	}
	rq, rt := h2Requests.FindSubmatch(out), h2Rate.FindSubmatch(out)
	if rq == nil || rt == nil {
		return sample{}, fmt.Errorf("h2load: no summary in %q", out)
	}
	n, _ := strconv.ParseFloat(string(rq[2]), 64)
	rate, _ := strconv.ParseFloat(string(rt[1]), 64)
	return sample{rate: rate, cpu: cpu, requests: n}, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range regexp.MustCompile(`[ ,]+`).Split(s, -1) {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
