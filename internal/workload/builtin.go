package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

func sizeField(name, doc string, def int64) scenario.Field {
	return scenario.Field{Name: name, Kind: scenario.KindSize, Doc: doc, Default: def, HasMin: true, Min: 1, List: true}
}

func countField(name, doc string) scenario.Field {
	return scenario.Field{Name: name, Kind: scenario.KindInt, Doc: doc, Default: int64(1), HasMin: true, Min: 1, List: true}
}

// StreamInfo registers the built-in TCP bulk-transfer workload.
func StreamInfo() Info {
	return Info{
		Name:    "stream",
		Summary: "TCP bulk transfer: throughput (receiver-acknowledged bytes), per-second series, retransmits",
		Params: []scenario.Field{
			sizeField("message_size", "bytes per write", 131072),
			countField("streams", "parallel TCP connections"),
			{Name: "congestion", Kind: scenario.KindString, List: true,
				Doc: "TCP congestion control of the sender's connections (cubic, bbr, reno: one the kernel has); unset: the namespace's default, which a new namespace inherits from the host"},
		},
		New:  func() Workload { return &agentWorkload{mode: "stream"} },
		Pods: true,
	}
}

// RRInfo registers the built-in request/response workload.
func RRInfo() Info {
	return Info{
		Name:    "rr",
		Summary: "TCP request/response on persistent connections, closed loop or paced at a rate: transactions/s, latency percentiles",
		Params: []scenario.Field{
			sizeField("request_size", "request bytes", 64),
			sizeField("response_size", "response bytes", 64),
			countField("concurrency", "connections, each with one transaction in flight"),
			{Name: "rate", Kind: scenario.KindFloat, HasMin: true, Min: 0, List: true,
				Doc: "offered transactions/s across all connections, paced (open loop, latency from the intended send time, as wrk2); unset or 0: closed loop"},
		},
		New:  func() Workload { return &agentWorkload{mode: "rr"} },
		Pods: true,
	}
}

// CRRInfo registers the built-in connect/request/response workload.
func CRRInfo() Info {
	return Info{
		Name:    "crr",
		Summary: "a new TCP connection per transaction: connections/s, connect+first-response latency",
		Params: []scenario.Field{
			sizeField("request_size", "request bytes", 64),
			sizeField("response_size", "response bytes", 64),
			countField("concurrency", "parallel connect-request-response-close loops"),
		},
		New:  func() Workload { return &agentWorkload{mode: "crr"} },
		Pods: true,
	}
}

// agentWorkload runs `spanperf agent serve` in the server site and
// `spanperf agent client` in the client site.
type agentWorkload struct{ mode string }

var _ Workload = (*agentWorkload)(nil)

// flagNames maps scenario parameters to agent client flags.
var flagNames = map[string]string{
	"message_size":  "--message-size",
	"streams":       "--streams",
	"congestion":    "--congestion",
	"request_size":  "--request-size",
	"response_size": "--response-size",
	"concurrency":   "--concurrency",
	"rate":          "--rate",
}

func (w *agentWorkload) Run(ctx context.Context, env Env) (*Result, error) {
	if len(env.FanIn) > 1 {
		return w.runFanIn(ctx, env)
	}
	srv, err := StartAgentServer(ctx, env.Server, env.Port)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(time.Second)
	args := []string{"client", "--mode", w.mode, "--target", env.Target.String(),
		"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
	for k, v := range env.Params {
		if f, ok := flagNames[k]; ok {
			args = append(args, f, results.FormatValue(v))
		}
	}
	return runAgentClient(ctx, env, srv, w.mode, args, 30*time.Second)
}

// runAgentClient runs `spanperf agent ARGS...` as the client of a trial
// against srv, already serving in env.Server, and returns its Result with the
// server's CPU over the measured window. label names the workload in errors;
// slack is how long past warmup+duration the client may take to finish.
func runAgentClient(ctx context.Context, env Env, srv testbed.Process, label string, args []string, slack time.Duration) (*Result, error) {
	var out bytes.Buffer
	cmd := agent.Command("agent-client", args...)
	cmd.Stdout = &out
	env.measure(env.Warmup, env.Duration)
	cli, err := env.Client.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	srvCPU := watchCPU(srv, env.Warmup, env.Duration)
	defer srvCPU.stop()
	if err := waitProcess(ctx, cli, env.Warmup+env.Duration+slack); err != nil {
		var res agent.Result
		if json.Unmarshal(out.Bytes(), &res) == nil && res.Error != "" {
			return nil, fmt.Errorf("%s client: %s", label, res.Error)
		}
		return nil, fmt.Errorf("%s client: %w", label, err)
	}
	select {
	case <-srv.Done():
		return nil, fmt.Errorf("%s: the server exited during the trial: %v", label, srv.Wait())
	default:
	}
	var res agent.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s client: bad output %q: %w", label, truncate(out.String(), 200), err)
	}
	if res.Error != "" {
		return nil, fmt.Errorf("%s client: %s", label, res.Error)
	}
	if secs, ok := srvCPU.seconds(); ok && res.Metrics != nil {
		res.Metrics[results.CPUSecondsServer] = secs
	}
	return &Result{Metrics: res.Metrics, Series: res.Series, Histogram: res.Histogram, Missing: res.Missing}, nil
}

// cpuWindow reads a process tree's CPU time warmup and warmup+duration
// after it is made, just after the client starts: the client's measured
// window, shifted early by the client's start-up and dial, which shift
// both ends alike. A process that is not local (in a pod) has no reading,
// unless it is a remoteCPU: then each read is an exec whose own CPU would
// disturb the trial, so the reads are made just outside the window
// (remoteLead before it, remoteLag after) and the CPU between them is
// scaled to the window's length, on the assumption that the load is
// steady across it (a paced client's is).
type cpuWindow struct {
	pid int
	// remote reads a process that is not local, when it can be read.
	remote   func() (float64, error)
	duration time.Duration
	t0, t1   *time.Timer
	c0, c1   chan cpuReading
}

// How far outside the window a remoteCPU is read.
const (
	remoteLead = 500 * time.Millisecond
	remoteLag  = 200 * time.Millisecond
)

// remoteCPU is implemented by server processes that are not on this
// machine but whose CPU can be read where they run (nginx in a pod's
// server container: that container's cgroup).
type remoteCPU interface {
	cpuSeconds() (float64, error)
}

type cpuReading struct {
	secs float64
	// at is when the reading was taken (a remote one: the middle of its exec).
	at  time.Time
	err error
}

func watchCPU(p testbed.Process, warmup, duration time.Duration) *cpuWindow {
	pid, _ := testbed.PIDOf(p)
	w := &cpuWindow{pid: pid, duration: duration, c0: make(chan cpuReading, 1), c1: make(chan cpuReading, 1)}
	start, end := warmup, warmup+duration
	if r, ok := p.(remoteCPU); ok {
		w.remote = r.cpuSeconds
		start, end = max(0, warmup-remoteLead), end+remoteLag
	}
	w.t0 = time.AfterFunc(start, func() { w.c0 <- w.read() })
	w.t1 = time.AfterFunc(end, func() { w.c1 <- w.read() })
	return w
}

func (w *cpuWindow) read() cpuReading {
	t := time.Now()
	if w.remote != nil {
		s, err := w.remote()
		return cpuReading{s, t.Add(time.Since(t) / 2), err}
	}
	if w.pid == 0 {
		return cpuReading{err: errNotLocal}
	}
	s, err := probe.TreeCPUSeconds(w.pid)
	return cpuReading{s, t, err}
}

// seconds returns the CPU seconds used in the window, ending it now if it
// has not ended; false when the window never began or a read failed.
func (w *cpuWindow) seconds() (float64, bool) {
	if w.t0.Stop() {
		w.t1.Stop()
		return 0, false
	}
	r0 := <-w.c0
	r1 := cpuReading{}
	if w.t1.Stop() {
		r1 = w.read()
	} else {
		r1 = <-w.c1
	}
	if r0.err != nil || r1.err != nil || r1.secs < r0.secs {
		return 0, false
	}
	if w.remote != nil {
		span := r1.at.Sub(r0.at)
		if span <= 0 {
			return 0, false
		}
		return (r1.secs - r0.secs) * w.duration.Seconds() / span.Seconds(), true
	}
	return r1.secs - r0.secs, true
}

// errNotLocal is the reading of a process that is not on this machine.
var errNotLocal = errors.New("not a local process")

func (w *cpuWindow) stop() {
	w.t0.Stop()
	w.t1.Stop()
}

// waitProcess waits for p to exit, stopping it when ctx is done or limit passes.
func waitProcess(ctx context.Context, p testbed.Process, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.Done():
		return p.Wait()
	case <-ctx.Done():
		p.Stop(time.Second)
		return ctx.Err()
	case <-t.C:
		p.Stop(time.Second)
		return fmt.Errorf("did not finish within %s", limit)
	}
}

// StartAgentServer starts `spanperf agent serve` on port in site and waits
// until it listens.
func StartAgentServer(ctx context.Context, site testbed.Site, port int) (testbed.Process, error) {
	return startAgent(ctx, site, "agent-server", "serve", "--listen", ":"+strconv.Itoa(port))
}

// startAgent starts `spanperf agent ARGS...` in site as a server named name
// and waits for its ready line.
func startAgent(ctx context.Context, site testbed.Site, name string, args ...string) (testbed.Process, error) {
	ready := newLineSignal()
	cmd := agent.Command(name, args...)
	cmd.Stdout = ready
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	select {
	case <-ready.c:
		return p, nil
	case <-p.Done():
		return nil, fmt.Errorf("%s on %s: %v", name, site.Name(), p.Wait())
	case <-ctx.Done():
		p.Stop(time.Second)
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		p.Stop(time.Second)
		return nil, fmt.Errorf("%s on %s: not ready after 10s: %s", name, site.Name(), p.Tail())
	}
}

// lineSignal closes c when the first full line has been written to it.
type lineSignal struct {
	once sync.Once
	c    chan struct{}
}

func newLineSignal() *lineSignal { return &lineSignal{c: make(chan struct{})} }

func (l *lineSignal) Write(b []byte) (int, error) {
	if bytes.IndexByte(b, '\n') >= 0 {
		l.once.Do(func() { close(l.c) })
	}
	return len(b), nil
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// FanIn marks agentWorkload as a FanInRunner.
func (w *agentWorkload) FanIn() {}

var _ FanInRunner = (*agentWorkload)(nil)

// headlineRate is the rate metric a fan-in trial sums and compares.
var headlineRate = map[string]string{
	"stream": results.ThroughputBPS,
	"rr":     results.TransactionsPerS,
	"crr":    results.ConnectionsPerS,
}

// additive metrics of the agent's client are summed over a fan-in's
// clients; the others (latencies) are kept per client only.
var additive = map[string]bool{
	results.ThroughputBPS: true, results.TransactionsPerS: true, results.ConnectionsPerS: true,
	results.Retransmits: true, "bytes": true, "transactions": true, "cpu_seconds_client": true,
	results.Errors: true, results.Timeouts: true, results.Late: true,
}

// runFanIn runs the agent's client in every site of env.FanIn at once,
// against one server, over one measured window. The record gets the sum
// of each additive metric, every client's metrics as METRIC{SITE}, and
// Jain's index of the clients' rates; a latency over all clients is
// missing (each client's is there), since percentiles do not add.
func (w *agentWorkload) runFanIn(ctx context.Context, env Env) (*Result, error) {
	srv, err := StartAgentServer(ctx, env.Server, env.Port)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(time.Second)
	type out struct {
		site string
		buf  testbed.SyncBuffer
		proc testbed.Process
	}
	outs := make([]*out, len(env.FanIn))
	env.measure(env.Warmup, env.Duration)
	for i, c := range env.FanIn {
		args := []string{"client", "--mode", w.mode, "--target", c.Target.String(),
			"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
		for k, v := range env.Params {
			if f, ok := flagNames[k]; ok {
				args = append(args, f, results.FormatValue(v))
			}
		}
		o := &out{site: c.Site.Name()}
		cmd := agent.Command("agent-client", args...)
		cmd.Stdout = &o.buf
		if o.proc, err = c.Site.Exec(ctx, cmd); err != nil {
			for _, prev := range outs[:i] {
				prev.proc.Stop(time.Second)
			}
			return nil, fmt.Errorf("%s client in %s: %w", w.mode, o.site, err)
		}
		outs[i] = o
	}
	srvCPU := watchCPU(srv, env.Warmup, env.Duration)
	defer srvCPU.stop()
	metrics := map[string]float64{}
	missing := map[string]string{}
	var rates []float64
	rate := headlineRate[w.mode]
	var errs []error
	for _, o := range outs {
		if err := waitProcess(ctx, o.proc, env.Warmup+env.Duration+30*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("%s client in %s: %w", w.mode, o.site, err))
			continue
		}
		var res agent.Result
		if err := json.Unmarshal(o.buf.Bytes(), &res); err != nil || res.Error != "" {
			errs = append(errs, fmt.Errorf("%s client in %s: %v%s", w.mode, o.site, err, res.Error))
			continue
		}
		for m, v := range res.Metrics {
			metrics[results.For(m, o.site)] = v
			if additive[m] {
				metrics[m] += v
			} else {
				missing[m] = "fan-in: per client only (" + results.For(m, "SITE") + "): percentiles of several clients do not add"
			}
		}
		rates = append(rates, res.Metrics[rate])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var sum, sq float64
	for _, x := range rates {
		sum, sq = sum+x, sq+x*x
	}
	if sq > 0 {
		metrics[results.JainFairness] = sum * sum / (float64(len(rates)) * sq)
	}
	if secs, ok := srvCPU.seconds(); ok {
		metrics[results.CPUSecondsServer] = secs
	}
	return &Result{Metrics: metrics, Missing: missing}, nil
}
