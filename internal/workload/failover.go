package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// ServersParam names failover's two server sites (scenario.ServersParam).
const ServersParam = scenario.ServersParam

// FailoverInfo registers failover.
func FailoverInfo() Info {
	return Info{
		Name: "failover",
		Summary: "a server in two sites, the client in a third, the datapath routing to one; mid-run the one in use fails: " +
			"the gap in successful transactions until the other answers, and the transactions that failed",
		Params: []scenario.Field{
			{Name: ServersParam, Kind: scenario.KindString, Default: "", List: true, Doc: `the two server sites, "b+c", the preferred first; "" is the last two sites (client_site picks the client's, default the first)`},
			{Name: "fail", Kind: scenario.KindString, Default: "server", Enum: []string{"server", "gateway"}, List: true, Doc: "what fails in the site in use: server (its process is killed with SIGKILL; on Kubernetes sites its pod is deleted, grace 1 s) or gateway (the site is cut off the underlay: packets from and to it are dropped silently; restored after the trial)"},
			{Name: "fail_after", Kind: scenario.KindDuration, Default: time.Second, Doc: "when, after the first answer, the site in use fails"},
			{Name: "run_for", Kind: scenario.KindDuration, Default: 3 * time.Second, Doc: "how long the client starts transactions (the failure and the switch-over must fit)"},
			{Name: "interval", Kind: scenario.KindDuration, Default: time.Millisecond, Doc: "how often the client starts a transaction (a new connection each)"},
			{Name: "attempt_timeout", Kind: scenario.KindDuration, Default: time.Second, Doc: "bound on each transaction"},
		},
		New:   func() Workload { return failover{} },
		Needs: "redundant",
		// On Kubernetes sites the datapath runs the servers as pods
		// (datapath.Link.Serve) and the probe runs in the client's pod.
		Pods: true,
	}
}

// failover is the failover workload.
type failover struct{}

var _ ControlRunner = failover{}

// Run refuses: failover routes through the datapath's redundancy
// (ControlRunner).
func (failover) Run(context.Context, Env) (*Result, error) {
	return nil, errors.New("failover: routes to a service served in two sites; the runner calls RunControl")
}

// failoverSites returns the two server sites the point names.
func failoverSites(env ControlEnv) ([]testbed.Site, error) {
	names := strings.Split(fmt.Sprint(env.Params[ServersParam]), "+")
	if s, _ := env.Params[ServersParam].(string); s == "" {
		if len(env.Sites) < 3 {
			return nil, fmt.Errorf("failover: needs 3 sites (a client and two servers), the testbed has %d", len(env.Sites))
		}
		names = []string{env.Sites[len(env.Sites)-2].Name(), env.Sites[len(env.Sites)-1].Name()}
	}
	if len(names) != 2 || names[0] == names[1] {
		return nil, fmt.Errorf("failover: %s %q: want two different sites, \"b+c\"", ServersParam, env.Params[ServersParam])
	}
	var out []testbed.Site
	for _, n := range names {
		i := slices.IndexFunc(env.Sites, func(s testbed.Site) bool { return s.Name() == n })
		if i < 0 {
			return nil, fmt.Errorf("failover: %s: %q is not a site", ServersParam, n)
		}
		if n == env.Client.Name() {
			return nil, fmt.Errorf("failover: %s: %q is the client's site", ServersParam, n)
		}
		out = append(out, env.Sites[i])
	}
	return out, nil
}

// RunControl starts a server (answering with its site's name) in both
// server sites on a fresh port, has the datapath route the client's site
// to them, and runs `agent failover` in the client's site. fail_after
// after the first answer, it kills the server of the site that answers
// then (fail: server) or cuts that site off the underlay (fail: gateway);
// when the probe is done it computes the outage from the attempts. The
// servers, the routing and the cut are removed after.
func (failover) RunControl(ctx context.Context, env ControlEnv) (_ *Result, rerr error) {
	if env.Serve != nil {
		return failoverServed(ctx, env)
	}
	if env.Redundant == nil {
		return nil, errors.New("failover: the datapath cannot route to a service served in two sites")
	}
	if env.Params["fail"] == "gateway" && env.Isolate == nil {
		return nil, errors.New("failover: fail gateway: this testbed cannot cut a site off")
	}
	servers, err := failoverSites(env)
	if err != nil {
		return nil, err
	}
	fp, err := failoverParamsOf(env.Params)
	if err != nil {
		return nil, err
	}
	port := controlPort()
	procs := map[string]testbed.Process{}
	defer func() {
		for _, p := range procs {
			p.Stop(time.Second)
		}
	}()
	for _, s := range servers {
		p, err := startAgent(ctx, s, "agent-server", "serve", "--listen", ":"+strconv.Itoa(port), "--name", s.Name())
		if err != nil {
			return nil, fmt.Errorf("failover: server: %w", err)
		}
		procs[s.Name()] = p
	}
	exp, err := env.Redundant(ctx, env.Client, servers, port)
	if err != nil {
		return nil, fmt.Errorf("failover: route %s to %s and %s: %w", env.Client.Name(), servers[0].Name(), servers[1].Name(), err)
	}
	var undoErr error
	defer func() {
		if undoErr == nil {
			undoWithin(exp)
		}
	}()
	target := exp.Target(env.Client)
	probe, out, first, err := startFailoverProbe(ctx, env.Client, target, fp)
	if err != nil {
		return nil, err
	}
	defer probe.Stop(time.Second)
	if procs[first.Site] == nil {
		return nil, fmt.Errorf("failover: probe's first answer came from %q, not a server site", first.Site)
	}
	if err := sleepUntil(ctx, time.Unix(0, first.AtNS).Add(fp.failAfter)); err != nil {
		return nil, err
	}
	// The site in use is the one that answered last: on a loaded machine
	// a health check may have moved the traffic before the failure.
	inUse := siteInUse(out.String(), first)
	var failAt time.Time
	switch fail := fmt.Sprint(env.Params["fail"]); fail {
	case "gateway":
		var failed testbed.Site
		for _, s := range servers {
			if s.Name() == inUse.Site {
				failed = s
			}
		}
		restore, err := env.Isolate(failed)
		// The failure is whole once every rule is in.
		failAt = time.Now()
		if err != nil {
			return nil, fmt.Errorf("failover: %w", err)
		}
		defer func() {
			if err := restore(); err != nil && rerr == nil {
				rerr = fmt.Errorf("failover: %w", err)
			}
		}()
	default:
		failAt = time.Now()
		killProcess(procs[inUse.Site])
		delete(procs, inUse.Site)
	}
	run, err := failoverRunOf(ctx, probe, out)
	if err != nil {
		return nil, err
	}
	undoErr = undoWithin(exp)
	m, err := failoverFigures(run, inUse.Site, failAt.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("failover: through %s after %s failed (%s): %w", target, inUse.Site, env.Params["fail"], err)
	}
	m[results.FailedAfterSeconds] = failAt.Sub(time.Unix(0, first.AtNS)).Seconds()
	if undoErr != nil {
		return nil, fmt.Errorf("failover: undo: %w", undoErr)
	}
	return &Result{Metrics: m}, nil
}

// siteInUse returns the last FailoverSwitch line in out (the probe's
// output so far), or first.
func siteInUse(out string, first agent.FailoverSwitch) agent.FailoverSwitch {
	in := first
	for _, l := range strings.Split(out, "\n") {
		var s agent.FailoverSwitch
		if json.Unmarshal([]byte(l), &s) == nil && s.Site != "" && s.AtNS >= in.AtNS {
			in = s
		}
	}
	return in
}

// failoverFigures computes failover's metrics from the probe's attempts:
// the server of site failed was killed at failAt (Unix ns). Failed
// transactions are those started after the first successful one.
func failoverFigures(run agent.FailoverRun, failed string, failAt int64) (map[string]float64, error) {
	var lastFailed, firstOther, firstOK int64
	for _, a := range run.Attempts {
		if a.OK() && (firstOK == 0 || a.StartNS < firstOK) {
			firstOK = a.StartNS
		}
	}
	m := map[string]float64{results.FailedTransactions: 0}
	for _, a := range run.Attempts {
		if !a.OK() {
			// Attempts before the first that got through found the
			// route still coming up: not failover's to count.
			if firstOK != 0 && a.StartNS > firstOK {
				m[results.FailedTransactions]++
			}
			continue
		}
		m[results.AnsweredBy+"{"+a.Site+"}"]++
		if a.Site == failed {
			lastFailed = max(lastFailed, a.EndNS)
		}
	}
	if lastFailed == 0 {
		return nil, fmt.Errorf("no answer from %s, the site in use", failed)
	}
	for _, a := range run.Attempts {
		if a.OK() && a.Site != failed && a.EndNS > lastFailed && (firstOther == 0 || a.EndNS < firstOther) {
			firstOther = a.EndNS
		}
	}
	if firstOther == 0 {
		return nil, fmt.Errorf("no answer from another site after the failure (%v failed transactions of %d)", m[results.FailedTransactions], len(run.Attempts))
	}
	m[results.OutageSeconds] = time.Duration(firstOther - lastFailed).Seconds()
	m[results.RecoverySeconds] = time.Duration(firstOther - failAt).Seconds()
	return m, nil
}

// failoverParams are failover's timing parameters.
type failoverParams struct {
	interval, duration, failAfter, attemptTimeout time.Duration
}

// failoverParamsOf reads interval, run_for, fail_after and
// attempt_timeout, refusing a failure after the run's end.
func failoverParamsOf(p results.Params) (failoverParams, error) {
	fp := failoverParams{
		interval:       durationParam(p, "interval", time.Millisecond),
		duration:       durationParam(p, "run_for", 3*time.Second),
		failAfter:      durationParam(p, "fail_after", time.Second),
		attemptTimeout: durationParam(p, "attempt_timeout", time.Second),
	}
	if fp.failAfter >= fp.duration {
		return fp, fmt.Errorf("failover: fail_after %v must be shorter than run_for %v", fp.failAfter, fp.duration)
	}
	return fp, nil
}

// startFailoverProbe starts `agent failover` in client toward target and
// waits for its first line, which names the site that answered first. The
// caller stops the probe.
func startFailoverProbe(ctx context.Context, client testbed.Site, target testbed.Target, fp failoverParams) (testbed.Process, *testbed.SyncBuffer, agent.FailoverSwitch, error) {
	var first agent.FailoverSwitch
	out := &testbed.SyncBuffer{}
	cmd := agent.Command("agent-failover", "failover", "--target", target.String(), "--duration", fp.duration.String(),
		"--interval", fp.interval.String(), "--attempt-timeout", fp.attemptTimeout.String())
	cmd.Stdout = out
	probe, err := client.Exec(ctx, cmd)
	if err != nil {
		return nil, nil, first, fmt.Errorf("failover: probe: %w", err)
	}
	if err := waitLine(ctx, probe, out, fp.duration); err != nil {
		probe.Stop(time.Second)
		return nil, nil, first, fmt.Errorf("failover: no answer through %s: %w", target, err)
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || first.AtNS == 0 || first.Site == "" {
		probe.Stop(time.Second)
		return nil, nil, first, fmt.Errorf("failover: probe said %q", line)
	}
	return probe, out, first, nil
}

// sleepUntil waits until t, or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failoverRunOf waits for the probe to end and reads its last line, the
// run's attempts.
func failoverRunOf(ctx context.Context, probe testbed.Process, out *testbed.SyncBuffer) (agent.FailoverRun, error) {
	var run agent.FailoverRun
	select {
	case <-probe.Done():
	case <-ctx.Done():
		return run, ctx.Err()
	}
	if err := lastJSONLine(out.String(), &run); err != nil {
		return run, fmt.Errorf("failover: %w: %v: %s", err, probe.Wait(), probe.Tail())
	}
	return run, nil
}
