package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// Options configure Run.
type Options struct {
	// Scenario is normalized and validated.
	Scenario *scenario.Scenario
	// Dir receives one record per trial.
	Dir *results.RunDir
	// Seed orders the trials (see Plan).
	Seed int64
	// Done holds the keys of trials already recorded; Run skips them.
	Done map[string]bool
	// Progress receives one line per trial; nil discards.
	Progress io.Writer
}

// NewID returns a short random ID for a run or a testbed.
func NewID() string {
	var b [3]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run runs every planned trial not in Done. A failed trial is recorded with
// its error and the run goes on. When ctx is done, the trial in flight is
// abandoned (not recorded), everything built is torn down, and Run returns
// ctx's error.
func Run(ctx context.Context, o Options) error {
	groups := Plan(o.Scenario, o.Seed)
	total, pending := 0, 0
	for _, g := range groups {
		for _, t := range g.Trials {
			total++
			if !o.Done[t.Key()] {
				pending++
			}
		}
	}
	p := &progress{w: o.Progress, total: total, pending: pending, start: time.Now()}
	p.incapable(o.Scenario)
	for _, g := range groups {
		var todo []Trial
		for _, t := range g.Trials {
			if !o.Done[t.Key()] {
				todo = append(todo, t)
			}
		}
		if len(todo) == 0 {
			continue
		}
		if err := runGroup(ctx, o, g, todo, p); err != nil {
			return err
		}
	}
	return nil
}

// runGroup builds a testbed and the group's datapath, runs its trials, and tears down.
func runGroup(ctx context.Context, o Options, g Group, todo []Trial, p *progress) (err error) {
	s := o.Scenario
	fail := func(cause error) error {
		for _, t := range todo {
			now := time.Now()
			rec := newRecord(o, t, now)
			rec.End, rec.Error = now, cause.Error()
			if err := o.Dir.Append(rec); err != nil {
				return err
			}
			p.done(t, rec.Error)
		}
		return nil
	}
	info, ok := plugins.Datapath(g.Datapath.Name)
	if !ok {
		return fail(fmt.Errorf("unknown datapath %q", g.Datapath.Name))
	}
	dp, err := info.New(g.Datapath.Options)
	if err != nil {
		return fail(fmt.Errorf("datapath %s: %w", g.Datapath.Label, err))
	}
	// Before anything is built: a datapath that cannot run in the
	// scenario's topology fails its trials without a testbed.
	if err := datapath.CheckTopology(g.Datapath.Name, dp, s.Topology); err != nil {
		return fail(fmt.Errorf("setup %s: %w", g.Datapath.Label, err))
	}
	var tb testbed.Testbed
	if s.IsKube() {
		var ktb *kube.Testbed
		if ktb, err = newKubeTestbed(ctx, s, NewID(), dp); err == nil {
			tb = ktb
		}
	} else {
		var ltb *netns.Testbed
		spec := TestbedSpec(s, NewID())
		if g.Sites > 0 {
			spec.Sites = g.Sites
		}
		if g.MTU > 0 {
			spec.MTU = g.MTU
		}
		if ltb, err = netns.New(ctx, spec); err == nil {
			tb = ltb
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fail(fmt.Errorf("testbed: %w", err))
	}
	defer func() { err = errors.Join(err, tb.Close()) }()
	// Trials that time the datapath's setup build their own, before the
	// group's is built.
	timed, todo := setupTimed(todo)
	for _, t := range timed {
		p.begin(t)
		rec := runSetupTimed(ctx, o, t, tb, g.Datapath.Name, dp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := o.Dir.Append(rec); err != nil {
			return err
		}
		p.done(t, rec.Error)
	}
	if len(todo) == 0 {
		return nil
	}
	setupStart := time.Now()
	link, err := datapath.Build(ctx, g.Datapath.Name, dp, tb)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fail(fmt.Errorf("setup %s: %w", g.Datapath.Label, err))
	}
	scale := scaleOf(ctx, s, tb, link, time.Since(setupStart))
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cerr := link.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("teardown %s: %w", g.Datapath.Label, cerr))
		}
	}()
	// Each datapath process in a cgroup of its own, for its CPU limit and
	// usage; removed before the link and testbed go, on every path out.
	var np *nodeProbes
	var ma *metricsAPI
	if ktb, ok := tb.(*kube.Testbed); ok && s.Kube.Probe == scenario.ProbeNode {
		if np, err = startNodeProbes(ctx, ktb, s.Kube.Image); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fail(fmt.Errorf("setup %s: %w", g.Datapath.Label, err))
		}
	} else if ok && s.Kube.Prometheus == "" {
		ma = newMetricsAPI(ktb)
	}
	cgs := newComponentCgroups(tb.Ledger().Run(), tb.Ledger(), link.Components)
	defer func() { err = errors.Join(err, cgs.Close()) }()
	// On clusters a limit patches the component's Deployment (or
	// DaemonSet, StatefulSet); restored before the link and testbed go,
	// on every path out.
	size := cgs.run
	if ktb, ok := tb.(*kube.Testbed); ok && hasLimits(todo) {
		ks := newKubeSizing(ktb, link, s.Kube.AllowPatch)
		defer func() {
			if cerr := ks.close(ctx); cerr != nil {
				err = errors.Join(err, fmt.Errorf("sizing %s: %w", g.Datapath.Label, cerr))
			}
		}()
		size = func(o Options, t Trial, run func(workload.MeasureFunc) results.Record) results.Record {
			return ks.run(ctx, o, t, run)
		}
	}
	// What the group's trials share (a broker) stops before the cgroups,
	// the link and the testbed go.
	shared := workload.NewShared()
	defer func() { err = errors.Join(err, shared.Close()) }()
	for _, t := range todo {
		client, server, target := EndpointsAt(tb, link, agent.DefaultPort, t.Point.Params)
		fanIn := fanInAt(tb, link, agent.DefaultPort, t.Point.Params)
		p.begin(t)
		var rec results.Record
		if werr := shapeWAN(ctx, s, tb, t.Point.Params); werr != nil {
			rec = newRecord(o, t, time.Now())
			rec.End, rec.Error = time.Now(), werr.Error()
		} else if cr, ok := controlRunner(t); ok {
			rec = runControl(ctx, o, t, tb, link, cr, client, server)
		} else {
			rec = size(o, t, func(measure workload.MeasureFunc) results.Record {
				return runTrial(ctx, o, t, tb.Ledger(), shared, measure, link, np, ma, client, server, target, fanIn)
			})
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		scale.addTo(&rec)
		if err := o.Dir.Append(rec); err != nil {
			return err
		}
		p.done(t, rec.Error)
	}
	return nil
}

// TestbedSpec is the local testbed scenario s asks for, for run id.
func TestbedSpec(s *scenario.Scenario, id string) netns.Spec {
	return netns.Spec{Run: id, Sites: s.Sites, MTU: s.WAN.MTU, RateBPS: s.WAN.RateBPS, Topology: s.Topology}
}

// Endpoints returns where a workload runs on tb through link, and what its
// client dials to reach port on the server. The client runs in the first
// site and the server in the last, and the client dials link.Target. In
// the gateway topology both run in the nodes behind those sites, and the
// client dials the server node's own address: routing carries it through
// the gateways and the datapath between them. A link with Workloads (a
// CNI's pods) runs them where it says, and the client dials link.Target.
func Endpoints(tb testbed.Testbed, link *datapath.Link, port int) (client, server testbed.Site, target testbed.Target) {
	return EndpointsAt(tb, link, port, nil)
}

// EndpointsAt is Endpoints with the client and server in the sites a
// trial's parameters name (scenario.ClientParam, scenario.ServerParam;
// defaults the first and the last). A name that is not a site of tb (the
// scenario's validation refuses those) keeps the default.
func EndpointsAt(tb testbed.Testbed, link *datapath.Link, port int, params results.Params) (client, server testbed.Site, target testbed.Target) {
	ci, si := siteIndexes(tb, params)
	if c, s, ok := gatewayNodes(tb, ci, si); ok {
		return c, s, testbed.AddrTarget(netip.AddrPortFrom(s.(*netns.Site).Addr(), uint16(port)))
	}
	sites := tb.Sites()
	client, server, target = sites[ci], sites[si], link.Target(sites[ci], sites[si], port)
	if link.Workloads != nil {
		client, server = link.Workloads(client), link.Workloads(server)
	}
	return client, server, target
}

// siteIndexes are the indexes in tb.Sites() of the client and server
// sites params name.
func siteIndexes(tb testbed.Testbed, params results.Params) (ci, si int) {
	sites := tb.Sites()
	ci, si = 0, len(sites)-1
	first, _, _ := strings.Cut(fmt.Sprint(params[scenario.ClientParam]), "+")
	for i, st := range sites {
		if first == st.Name() {
			ci = i
		}
		if params[scenario.ServerParam] == st.Name() {
			si = i
		}
	}
	return ci, si
}

// fanInAt lists the client sites of a fan-in point (client_site "a+b+c")
// with what each dials; nil for a point with one client.
func fanInAt(tb testbed.Testbed, link *datapath.Link, port int, params results.Params) []workload.FanInClient {
	names := strings.Split(fmt.Sprint(params[scenario.ClientParam]), "+")
	if len(names) < 2 {
		return nil
	}
	var out []workload.FanInClient
	for _, n := range names {
		p := maps.Clone(params)
		p[scenario.ClientParam] = n
		c, _, target := EndpointsAt(tb, link, port, p)
		out = append(out, workload.FanInClient{Site: c, Target: target})
	}
	return out
}

// gatewayNodes returns the node namespaces behind local sites ci and si of
// a testbed in the gateway topology, where workloads run there.
func gatewayNodes(tb testbed.Testbed, ci, si int) (client, server testbed.Site, ok bool) {
	ltb, isLocal := tb.(*netns.Testbed)
	if !isLocal || ltb.Topology() != testbed.TopologyGateway {
		return nil, nil, false
	}
	local := ltb.LocalSites()
	return ltb.Node(local[ci]), ltb.Node(local[si]), true
}

func newRecord(o Options, t Trial, start time.Time) results.Record {
	return results.Record{
		Run: o.Dir.Manifest.Run, Trial: t.Index, Datapath: t.Datapath.Label,
		Workload: t.Point.Workload, Params: t.Point.Params, Rep: t.Rep, Start: start,
		Metrics: map[string]float64{},
	}
}

// trialSlack is how long a trial may overrun warmup+duration, or the
// TrialLimit of a workload that has one (process start, connection setup,
// teardown), before it is stopped.
const trialSlack = 30 * time.Second

// runTrial runs trial t's workload through link. The workload's measured
// window (workload.Env.Measure) starts the probe and measure, which the
// caller uses for the cgroups' CPU; its temp dirs are named after the run
// and recorded in ledger.
//
// On Kubernetes sites, np (nil without probe: node) runs the node probes
// over the window; else ma (nil with prometheus:) reads the metrics API.
func runTrial(ctx context.Context, o Options, t Trial, ledger *testbed.Ledger, shared *workload.Shared, measure workload.MeasureFunc, link *datapath.Link, np *nodeProbes, ma *metricsAPI, client, server testbed.Site, target testbed.Target, fanIn []workload.FanInClient) results.Record {
	rec := newRecord(o, t, time.Now())
	rec.Components = link.Components
	defer func() { rec.End = time.Now() }()
	winfo, ok := plugins.Workload(t.Point.Workload)
	if !ok {
		rec.Error = fmt.Sprintf("unknown workload %q", t.Point.Workload)
		return rec
	}
	s := o.Scenario
	env := workload.Env{
		Client: client, Server: server, Port: agent.DefaultPort,
		Target:   target,
		Params:   t.Point.Params,
		Duration: s.Duration, Warmup: s.Warmup,
		MkdirTemp: ledger.MkdirTemp,
		Shared:    shared,
	}
	w := winfo.New()
	if _, ok := w.(workload.FanInRunner); len(fanIn) > 1 && !ok {
		rec.Error = fmt.Sprintf("%s: runs one client; a client_site with several sites (%v) is for stream, rr and crr", t.Point.Workload, t.Point.Params[scenario.ClientParam])
		return rec
	}
	env.FanIn = fanIn
	limit := s.Warmup + s.Duration
	tl, steps := w.(workload.TrialLimiter)
	if steps {
		limit = tl.TrialLimit(env)
	} else if sl, ok := w.(workload.StartLimiter); ok {
		limit += sl.StartLimit(env)
	}
	tctx, cancel := context.WithTimeout(ctx, limit+trialSlack)
	defer cancel()
	var res *workload.Result
	var probed *probed
	var err error
	switch {
	case steps:
		// The probe measures one window, and such a trial runs one per
		// step: its figures would describe whichever step it caught.
		res, err = w.Run(tctx, env)
		probed = unprobed(s, link.Components, errors.New("not measured: the trial runs one window per step; run its workload at the rate found to account the datapath"))
	case s.IsKube():
		// The machine the controller runs on is not the nodes': its probe
		// would measure the wrong CPU. The node probes measure there
		// (probe: node); else Prometheus gives the pods' CPU.
		var start time.Time
		var length time.Duration
		var pr *probeRun
		var mr *metricsAPIRun
		env.Measure = func(delay, l time.Duration) {
			measure(delay, l)
			start, length = time.Now().Add(delay), l
			if np != nil {
				pr = np.start(tctx, s, link.Components, delay, l)
			} else if ma != nil {
				mr = ma.start(tctx, link.Components)
			}
		}
		res, err = w.Run(tctx, env)
		end := start.Add(length)
		if now := time.Now(); now.Before(end) {
			end = now
		}
		if pr != nil {
			probed = pr.wait(s, link.Components)
		} else {
			probed = kubeProbed(ctx, s, link.Components, start, end, mr)
		}
	default:
		res, probed, err = runProbed(tctx, s, link.Components, runNetns(client), func(probe workload.MeasureFunc) (*workload.Result, error) {
			env.Measure = func(delay, length time.Duration) {
				measure(delay, length)
				probe(delay, length)
			}
			return w.Run(tctx, env)
		})
	}
	rec.End = time.Now()
	if link.Alive != nil {
		if derr := link.Alive(); derr != nil {
			err = errors.Join(derr, err)
		}
	}
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	rec.Metrics, rec.Series, rec.Histogram = res.Metrics, res.Series, res.Histogram
	rec.WindowStart, rec.WindowEnd = probed.res.Start, probed.res.End
	// Every workload's tail percentiles obey the sample rule, here too
	// in case one forgot.
	rec.Missing = results.DropThinTails(rec.Metrics, maps.Clone(res.Missing))
	probed.addTo(&rec)
	return rec
}

// progress prints one line per trial with an estimate of the time left.
type progress struct {
	w              io.Writer
	total, pending int
	finished       int
	start          time.Time
}

func (p *progress) begin(t Trial) {
	if p.w == nil {
		return
	}
	eta := "–"
	if p.finished > 0 {
		per := time.Since(p.start) / time.Duration(p.finished)
		eta = (per * time.Duration(p.pending-p.finished)).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "[%*d/%d] %-12s %-6s %-45s rep %d  ETA %s\n", len(fmt.Sprint(p.total)), t.Index+1, p.total,
		t.Datapath.Label, t.Point.Workload, t.Point.Params.Key(), t.Rep+1, eta)
}

func (p *progress) done(t Trial, errText string) {
	p.finished++
	if p.w != nil && errText != "" {
		if len(errText) > 300 {
			errText = errText[:300] + "…"
		}
		fmt.Fprintf(p.w, "    trial %d failed: %s\n", t.Index+1, strings.ReplaceAll(errText, "\n", "\n      "))
	}
}
