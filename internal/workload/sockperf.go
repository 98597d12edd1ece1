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

// SockperfTool is sockperf and its Debian package.
var SockperfTool = Tool{Prog: "sockperf", Pkg: "sockperf"}

// SockperfInfo registers the sockperf driver: TCP ping-pong (closed loop,
// one message in flight) or under-load (messages sent at a fixed rate,
// every 100th answered and timed).
func SockperfInfo() Info {
	return Info{
		Name:    "sockperf",
		Summary: "sockperf over TCP, ping-pong or under-load: transactions/s, round-trip latency percentiles",
		Params: []scenario.Field{
			{Name: "message_size", Kind: scenario.KindSize, Doc: "bytes per message, each way (sockperf -m; at least 14)",
				Default: int64(64), HasMin: true, Min: 14, List: true},
			{Name: "mode", Kind: scenario.KindString, Doc: "ping-pong (closed loop) or under-load (paced at rate)",
				Default: "ping-pong", Enum: []string{"ping-pong", "under-load"}, List: true},
			{Name: "rate", Kind: scenario.KindFloat, Doc: "messages/s in under-load mode (sockperf --mps); unset: 10000",
				HasMin: true, Min: 1, List: true},
		},
		New: func() Workload { return Sockperf{} },
	}
}

// Sockperf runs `sockperf server --tcp` in the server site and `sockperf
// ping-pong` or `under-load` with --full-rtt in the client site. sockperf
// takes whole seconds and keeps its own warm-up (400 ms) and cool-down out
// of its statistics: the run lasts the duration plus the warmup, rounded
// up, and the metrics cover sockperf's valid duration. The client lingers
// about 2 s after its run.
type Sockperf struct{}

var (
	_ Workload = Sockperf{}
	_ Checker  = Sockperf{}
)

// Check says whether sockperf is installed.
func (Sockperf) Check(context.Context) error { return SockperfTool.Check() }

// Run implements Workload.
func (w Sockperf) Run(ctx context.Context, env Env) (*Result, error) {
	if err := w.Check(ctx); err != nil {
		return nil, err
	}
	// sockperf prints its errors to stdout, and with stdout on /dev/null (a
	// nil Stdout) sockperf server exits at once. --uc-reuseaddr: the
	// previous trial's connections may hold the port in TIME_WAIT.
	var srvOut testbed.SyncBuffer
	srv, err := startToolServer(ctx, env.Server, testbed.Command{Name: "sockperf-server", Path: "sockperf",
		Args:   []string{"server", "--tcp", "--uc-reuseaddr", "-i", "0.0.0.0", "-p", strconv.Itoa(env.Port)},
		Stdout: &srvOut}, env.Port)
	if err != nil {
		return nil, fmt.Errorf("sockperf: %w: %s", err, truncate(ansiEscape.ReplaceAllString(srvOut.String(), ""), 300))
	}
	defer srv.Stop(time.Second)
	dir, err := env.mkdirTemp("sockperf")
	if err != nil {
		return nil, fmt.Errorf("sockperf: %w", err)
	}
	defer os.RemoveAll(dir)
	logFile := filepath.Join(dir, "full.csv")
	mode := stringParam(env.Params, "mode", "ping-pong")
	secs := wholeSeconds(env.Duration+env.Warmup, 1)
	args := []string{mode, "--tcp", "--full-rtt", "--full-log", logFile, "-i", env.Target.Host,
		"-p", strconv.Itoa(env.Target.Port), "-t", strconv.Itoa(secs),
		"-m", strconv.FormatInt(intParam(env.Params, "message_size", 64), 10)}
	rate := 0.0
	if mode == "under-load" {
		rate = floatParam(env.Params, "rate", 10000)
		args = append(args, "--mps", strconv.FormatInt(int64(rate), 10))
	}
	// Within the run, past sockperf's own 400 ms warm-up when the
	// scenario's warmup is at least that.
	env.measure(env.Warmup, env.Duration)
	out, runErr := runToolClient(ctx, env.Client, testbed.Command{Name: "sockperf", Path: "sockperf", Args: args},
		time.Duration(secs)*time.Second+30*time.Second)
	log, _ := os.ReadFile(logFile)
	res, err := ParseSockperf(out, log, mode)
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("sockperf: %w", runErr)
		}
		return nil, fmt.Errorf("sockperf: %w", err)
	}
	if rate > 0 {
		res.Metrics[results.TargetRate] = rate
	}
	// No cpu_seconds_server: the windowed reading of sockperf's server read
	// 0 s while its total grew (not understood yet); missing beats a wrong zero.
	return res, nil
}

var (
	ansiEscape      = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sockperfValid   = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)`)
	sockperfAvg     = regexp.MustCompile(`avg-(?:rtt|lat(?:ency)?)=([0-9.]+)`)
	sockperfPercent = regexp.MustCompile(`---> percentile ([0-9.]+) =\s*([0-9.]+)`)
	sockperfMax     = regexp.MustCompile(`---> <MAX> observation =\s*([0-9.]+)`)
	// sockperfObservations is the number of latencies its percentiles
	// were taken from.
	sockperfObservations = regexp.MustCompile(`Total (\d+) observations`)
)

// ParseSockperf reads a sockperf client's output (run with --full-rtt, so
// latencies are round trips in µs) and, when not empty, its --full-log
// (one line per answered message in the valid duration, the round trip
// last), from which the latency metrics and histogram are then taken;
// without it they are sockperf's printed ones, with no histogram, and the
// sample count is its "Total N observations". In
// ping-pong mode transactions/s are the replies received per second of
// sockperf's valid duration; in under-load mode, the messages sent per
// second (only sampled ones are answered). A line with "ERROR" is an error
// quoting it.
func ParseSockperf(out, log []byte, mode string) (*Result, error) {
	text := ansiEscape.ReplaceAllString(string(out), "")
	sc := bufio.NewScanner(bytes.NewReader([]byte(text)))
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "ERROR") {
			return nil, fmt.Errorf("%w: %s", errToolReported, strings.TrimSpace(strings.TrimPrefix(line, "sockperf:")))
		}
	}
	v := sockperfValid.FindStringSubmatch(text)
	if v == nil {
		return nil, fmt.Errorf("no [Valid Duration] line in output %q", truncate(text, 300))
	}
	runtime, _ := strconv.ParseFloat(v[1], 64)
	sent, _ := strconv.ParseFloat(v[2], 64)
	recv, _ := strconv.ParseFloat(v[3], 64)
	if runtime <= 0 || recv == 0 {
		return nil, fmt.Errorf("no message answered in %s s (sent %.0f)", v[1], sent)
	}
	us := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f / 1e6 }
	m := map[string]float64{results.DurationS: runtime}
	if mode == "under-load" {
		m[results.TransactionsPerS] = sent / runtime
	} else {
		m[results.TransactionsPerS] = recv / runtime
	}
	if a := sockperfAvg.FindStringSubmatch(text); a != nil {
		m[results.LatencyMean] = us(a[1])
	}
	if x := sockperfMax.FindStringSubmatch(text); x != nil {
		m[results.LatencyMax] = us(x[1])
	}
	names := map[string]string{"50.000": results.LatencyP50, "90.000": results.LatencyP90,
		"99.000": results.LatencyP99, "99.900": results.LatencyP999, "99.990": results.LatencyP9999}
	for _, p := range sockperfPercent.FindAllStringSubmatch(text, -1) {
		if name, ok := names[p[1]]; ok {
			m[name] = us(p[2])
		}
	}
	if _, ok := m[results.LatencyP50]; !ok {
		return nil, fmt.Errorf("no percentiles in output %q", truncate(text, 300))
	}
	if o := sockperfObservations.FindStringSubmatch(text); o != nil {
		m[results.LatencySamples], _ = strconv.ParseFloat(o[1], 64)
	}
	res := &Result{Metrics: m}
	h := newLatencyHist()
	ls := bufio.NewScanner(bytes.NewReader(log))
	for ls.Scan() {
		fs := strings.Split(ls.Text(), ",")
		if len(fs) != 4 {
			continue
		}
		rtt, err := strconv.ParseFloat(strings.TrimSpace(fs[3]), 64)
		if err != nil {
			continue // the header
		}
		if err := h.RecordValue(max(int64(rtt*1e3), 1)); err != nil {
			return nil, fmt.Errorf("full log: %w", err)
		}
	}
	if h.TotalCount() > 0 {
		lat, enc, err := histogramMetrics(h)
		if err != nil {
			return nil, err
		}
		for k, v := range lat {
			m[k] = v
		}
		res.Histogram = enc
	}
	res.Missing = results.DropThinTails(m, nil)
	return res, nil
}
