package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// ConnectionsInfo registers connections.
func ConnectionsInfo() Info {
	return Info{
		Name: "connections",
		Summary: "memory per open connection: count TCP connections opened at a bounded rate through a datapath set up fresh for the trial, " +
			"held with small keepalives; each datapath process's RSS idle and while they are held, the connect rate achieved, failures",
		Params: []scenario.Field{
			{Name: "count", Kind: scenario.KindInt, Default: int64(1000), HasMin: true, Min: 1, List: true,
				Doc: "TCP connections to open and hold at once; a list sweeps it, and the summary fits RSS against the connections held"},
			{Name: "connect_rate", Kind: scenario.KindFloat, Default: 1000.0, HasMin: true, Min: 0,
				Doc: "connection attempts started per second (at most 256 under way at once); 0: as fast as those allow"},
			{Name: "keepalive", Kind: scenario.KindDuration, Default: 5 * time.Second,
				Doc: "time between each held connection's keepalive exchanges (8 bytes each way); count/keepalive may not exceed 10000/s"},
		},
		New: func() Workload { return connections{} },
	}
}

// connections is the connections workload. Each trial gets a datapath of
// its own (a SetupTimer), so that every level of a sweep starts from the
// same idle processes: memory a process keeps after its connections close
// (malloc arenas, a Go heap, HAProxy's pools) would otherwise carry from
// one trial into the next.
type connections struct{}

var (
	_ SetupTimer   = connections{}
	_ TrialLimiter = connections{}
)

// Pacing of the RSS samples.
const (
	// idleSettle is how long the fresh datapath idles before its idle
	// RSS is sampled.
	idleSettle = 500 * time.Millisecond
	// idleSamples are taken rssEvery apart; the idle RSS is their median.
	idleSamples = 5
	rssEvery    = 200 * time.Millisecond
	// holdSlack is what opening may take beyond count/connect_rate: the
	// last connect and first keepalive (10 s each at most) and start-up.
	holdSlack = 30 * time.Second
)

// Run refuses: connections needs a datapath of its own (SetupTimer).
func (connections) Run(context.Context, Env) (*Result, error) {
	return nil, errors.New("connections: sets up a datapath of its own per trial; the runner calls TimeSetup")
}

// TrialLimit bounds a trial: opening (openLimit), the warmup and the
// measured window, and slack.
func (connections) TrialLimit(env Env) time.Duration {
	return openLimit(env.Params) + env.Warmup + env.Duration + holdSlack
}

// minOpenRate is the slowest opening a trial waits for: the connect rate
// is a result, and a relay on a loaded machine may open far fewer than
// asked, but one that opens fewer than this per second fails the trial.
const minOpenRate = 100.0

// openLimit bounds how long opening count connections may take: at
// connect_rate, or at minOpenRate if that is slower, plus slack.
func openLimit(p results.Params) time.Duration {
	count := float64(intParam(p, "count", 1000))
	rate := floatParam(p, "connect_rate", 1000)
	if rate <= 0 || rate > minOpenRate {
		rate = minOpenRate
	}
	return time.Duration(count/rate*float64(time.Second)) + holdSlack
}

// TimeSetup sets the trial's datapath up, checks that it carries count
// connections, starts the agent's hold server in the server site, samples
// the datapath's processes' idle RSS, opens count
// connections through it from the client site (`agent hold`), and once
// they are open and the warmup has passed, samples the RSS over the
// measured window while they are held; then it lets them go and takes the
// datapath down.
func (connections) TimeSetup(ctx context.Context, env SetupEnv) (_ *Result, err error) {
	p := env.Params
	count := int(intParam(p, "count", 1000))
	rate := floatParam(p, "connect_rate", 1000)
	keepalive := durationParam(p, "keepalive", 5*time.Second)
	if perS := float64(count) / keepalive.Seconds(); perS > agent.MaxKeepalivesPerS {
		return nil, fmt.Errorf("connections: %d connections with a keepalive every %v make %.0f exchanges/s, above the %d/s allowed: raise keepalive",
			count, keepalive, perS, agent.MaxKeepalivesPerS)
	}
	built, err := env.Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connections: setup: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cerr := built.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("connections: teardown: %w", cerr)
		}
	}()
	if built.MaxConnections > 0 && count > built.MaxConnections {
		return nil, fmt.Errorf("connections: count %d is above what the datapath carries: %s", count, built.MaxConnectionsBy)
	}
	srv, err := startAgent(ctx, env.Server, "agent-hold-server", "hold-serve", "--listen", ":"+strconv.Itoa(env.Port), "--count", strconv.Itoa(count))
	if err != nil {
		return nil, fmt.Errorf("connections: %w", err)
	}
	defer srv.Stop(time.Second)
	var procs []results.Component
	for _, c := range built.Components {
		if c.PID > 0 {
			procs = append(procs, c)
		}
	}
	if err := sleepCtx(ctx, idleSettle); err != nil {
		return nil, err
	}
	idle, err := sampleRSS(ctx, procs, idleSamples, rssEvery)
	if err != nil {
		return nil, fmt.Errorf("connections: idle: %w", err)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	out := &testbed.SyncBuffer{}
	maxHold := env.Warmup + env.Duration + holdSlack
	cmd := agent.Command("agent-hold", "hold", "--target", built.Target.String(), "--count", strconv.Itoa(count),
		"--connect-rate", results.FormatValue(rate), "--keepalive", keepalive.String(), "--max-hold", maxHold.String())
	cmd.Stdin, cmd.Stdout = pr, out
	cli, err := env.Client.Exec(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("connections: client: %w", err)
	}
	// Close the pipe before stopping the client: stopping waits for the
	// copy into its stdin, which ends only when the pipe closes (stopped
	// the other way round, a cancelled trial hung).
	defer func() {
		pw.Close()
		cli.Stop(time.Second)
	}()
	if err := waitLine(ctx, cli, out, openLimit(p)); err != nil {
		return nil, fmt.Errorf("connections: client: opening %d connections (at least %.0f/s): %w%s", count, minOpenRate, err, agentError(out))
	}
	var opened agent.HoldOpened
	first, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(first), &opened); err != nil {
		return nil, fmt.Errorf("connections: client said %q%s", truncate(first, 200), agentError(out))
	}
	if opened.Open == 0 {
		err := waitProcess(ctx, cli, holdSlack)
		return nil, fmt.Errorf("connections: client: %v%s", err, agentError(out))
	}
	if err := sleepCtx(ctx, env.Warmup); err != nil {
		return nil, err
	}
	n := max(1, int(env.Duration/rssEvery)+1)
	held, err := sampleRSS(ctx, procs, n, env.Duration/time.Duration(max(1, n-1)))
	if err != nil {
		return nil, fmt.Errorf("connections: while held: %w", err)
	}
	// Closing the pipe lets the connections go.
	pw.Close()
	if err := waitProcess(ctx, cli, holdSlack); err != nil {
		return nil, fmt.Errorf("connections: client: %w%s", err, agentError(out))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res agent.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Metrics == nil {
		return nil, fmt.Errorf("connections: client said %q%s", truncate(out.String(), 200), agentError(out))
	}
	select {
	case <-srv.Done():
		return nil, fmt.Errorf("connections: the server exited during the trial: %v: %s", srv.Wait(), srv.Tail())
	default:
	}
	out2 := &Result{Metrics: res.Metrics, Missing: map[string]string{}}
	rssMetrics(out2, procs, idle, held, res.Metrics[results.OpenConnections])
	if opened.Failures > 0 {
		out2.Warnings = append(out2.Warnings, fmt.Sprintf("connect failures: %d of %d connections did not open; the first: %s", opened.Failures, count, opened.FirstError))
	}
	if d := res.Metrics[results.KeepaliveFailures]; d > 0 {
		out2.Warnings = append(out2.Warnings, fmt.Sprintf("keepalive failures: %.0f of %d held connections dropped while the RSS was sampled", d, opened.Open))
	}
	return out2, nil
}

// rssMetrics adds the RSS figures of procs, idle and held (by component
// name), to res: per component and over the datapath's processes, and
// the trial's two-point figure per connection. A datapath without a
// process of its own has them missing.
func rssMetrics(res *Result, procs []results.Component, idle, held map[string]float64, open float64) {
	m := res.Metrics
	if len(procs) == 0 {
		why := "the datapath has no process of its own (the kernel's socket memory is not a process's RSS)"
		for _, k := range []string{results.RSSBytesDatapath, results.RSSBytesIdleDatapath, results.RSSBytesAddedPerConnectionDatapath} {
			res.Missing[k] = why
		}
		return
	}
	var sumIdle, sumHeld float64
	for _, c := range procs {
		i, h := idle[c.Name], held[c.Name]
		m[results.For(results.RSSBytesIdle, c.Name)] = i
		m[results.For(results.RSSBytes, c.Name)] = h
		if open > 0 {
			m[results.For(results.RSSBytesAddedPerConnection, c.Name)] = (h - i) / open
		}
		sumIdle += i
		sumHeld += h
	}
	m[results.RSSBytesIdleDatapath] = sumIdle
	m[results.RSSBytesDatapath] = sumHeld
	if open > 0 {
		m[results.RSSBytesAddedPerConnectionDatapath] = (sumHeld - sumIdle) / open
	}
}

// sampleRSS reads the RSS of each component's process tree n times,
// every apart (the first at once), and returns each one's median by
// component name. A component whose process is gone is an error: the
// datapath died.
func sampleRSS(ctx context.Context, comps []results.Component, n int, every time.Duration) (map[string]float64, error) {
	samples := map[string][]float64{}
	for i := range n {
		if i > 0 {
			if err := sleepCtx(ctx, every); err != nil {
				return nil, err
			}
		}
		for _, c := range comps {
			v, err := probe.TreeRSSBytes(c.PID)
			if err != nil {
				return nil, fmt.Errorf("rss of %s: %w", c.Name, err)
			}
			samples[c.Name] = append(samples[c.Name], v)
		}
	}
	out := map[string]float64{}
	for name, vs := range samples {
		slices.Sort(vs)
		out[name] = vs[len(vs)/2]
	}
	return out, nil
}

// sleepCtx sleeps d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// agentError is ": " and the error an agent printed as its last line of
// out (a Result with Error set), or "".
func agentError(out *testbed.SyncBuffer) string {
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res agent.Result
	if json.Unmarshal([]byte(lines[len(lines)-1]), &res) == nil && res.Error != "" {
		return ": " + res.Error
	}
	return ""
}
