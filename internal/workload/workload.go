// Package workload defines what runs through a datapath in a trial: the
// Workload interface, its registry entry, and the built-in workloads that
// drive `spanperf agent`. It knows nothing of datapaths.
package workload

import (
	"context"
	"os"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Env is everything one trial of a workload needs.
type Env struct {
	// Client and Server are the sites the workload's two ends run in.
	Client, Server testbed.Site
	// Port is the port the server must listen on (on every address).
	Port int
	// Target is what the client dials to reach Port on Server, through the
	// datapath under test: an address, or a name resolved in the client's
	// site.
	Target testbed.Target
	// FanIn, when it has more than one entry, asks for one client in each
	// of these sites at once against the one server, each dialling its own
	// target (Client and Target are the first's). Only a FanInRunner can;
	// the runner fails the trial of any other workload.
	FanIn []FanInClient
	// Params is the matrix point.
	Params results.Params
	// Duration is the measured time; Warmup runs before it, not counted.
	Duration, Warmup time.Duration
	// Measure, when not nil, is called by Run once, right before it starts
	// the client whose figures it reports, when everything else the trial
	// needs (servers, a database, keys) is ready: that client's measured
	// window begins delay after the call and lasts length. The runner
	// measures the trial's CPU (per process, per cgroup, machine-wide) and
	// energy over that window, so set-up work is not counted. A workload
	// that runs several windows (a rate sweep) gets none.
	Measure MeasureFunc
	// MkdirTemp, when not nil, makes a directory for the trial's files
	// (keys, a database cluster, logs) named after the run and recorded in
	// its ledger, so that `spanperf clean` removes it after a crash; kind
	// ([a-z0-9-]) names what it holds. Run removes it when done. nil means
	// os.MkdirTemp in the system's temp dir, unrecorded.
	MkdirTemp func(kind string) (string, error)
	// Shared, when not nil, holds what the trials of the group share (a
	// broker that boots for seconds); the runner closes it when the group
	// ends. nil: the trial starts and stops everything itself.
	Shared *Shared
}

// FanInClient is one client site of a fan-in trial and what it dials.
type FanInClient struct {
	Site   testbed.Site
	Target testbed.Target
}

// FanInRunner is a workload that runs Env.FanIn: its Run starts a client
// in every site listed, and its Result has the aggregate rate, each
// client's (METRIC{SITE}) and results.JainFairness.
type FanInRunner interface {
	Workload
	FanIn()
}

// MeasureFunc is told when a workload's measured window begins (delay
// from the call) and how long it lasts.
type MeasureFunc func(delay, length time.Duration)

// measure calls e.Measure, if set.
func (e Env) measure(delay, length time.Duration) {
	if e.Measure != nil {
		e.Measure(delay, length)
	}
}

// mkdirTemp makes a temp dir for the trial with e.MkdirTemp, or one named
// spanperf-KIND-* when it is nil.
func (e Env) mkdirTemp(kind string) (string, error) {
	if e.MkdirTemp != nil {
		return e.MkdirTemp(kind)
	}
	return os.MkdirTemp("", "spanperf-"+kind+"-")
}

// Result is what one trial measured.
type Result struct {
	// Metrics by name, in base units.
	Metrics map[string]float64
	// Series by metric name.
	Series map[string]results.Series
	// Histogram is the latency histogram (HdrHistogram V2 base64, ns), if any.
	Histogram string
	// Missing names metrics the workload could not report, with the reason
	// (e.g. a tail percentile from too few samples; see
	// results.DropThinTails).
	Missing map[string]string
	// Warnings are conditions that make the trial's figures less reliable
	// without failing it, one sentence each (results.Record.Warnings).
	// The runner records them for SetupTimer trials.
	Warnings []string
}

// Workload runs one trial.
type Workload interface {
	// Run starts what the workload needs in env's sites, runs it, stops
	// everything it started and returns the measurement. When ctx is done,
	// Run stops early and returns ctx's error.
	Run(ctx context.Context, env Env) (*Result, error)
}

// Checker is implemented by workloads that need something this machine may
// lack (an external tool); Check says what and which package provides it.
type Checker interface {
	Check(ctx context.Context) error
}

// TrialLimiter is implemented by workloads whose Run lasts longer than the
// trial's warmup+duration: a rate sweep runs one such window per step.
// The runner does not probe such a trial: one probe window cannot
// describe many.
type TrialLimiter interface {
	// TrialLimit is the longest Run may take with env, the start-up and
	// teardown of every window included. The runner stops the trial after
	// it, plus its own slack.
	TrialLimit(env Env) time.Duration
}

// Func adapts a function to the Workload interface.
type Func func(ctx context.Context, env Env) (*Result, error)

// Run calls f.
func (f Func) Run(ctx context.Context, env Env) (*Result, error) { return f(ctx, env) }

// Info describes a registered workload.
type Info struct {
	// Name is the workload's type in scenario files.
	Name string
	// Summary is one line for `spanperf list`.
	Summary string
	// Params are the parameters the workload accepts; List ones expand the matrix.
	Params []scenario.Field
	// New makes the workload.
	New func() Workload
	// Pods marks a workload that runs on Kubernetes sites: it starts
	// `spanperf agent` (testbed.Command.Agent), which the agent image
	// holds, or programs of the run's server image in the pods' server
	// containers (testbed.Command.Server; http's nginx, pgbench). The
	// others need programs on the controller's machine and run only on
	// local sites.
	Pods bool
	// CheckParams, when not nil, says what is wrong with one point of the
	// workload's matrix (defaults applied) beyond each value's kind: keys
	// that exclude each other. A scenario.FieldError names the key.
	CheckParams func(params results.Params) error
	// Needs names a datapath capability the workload needs
	// (datapath.NeedExpose, datapath.NeedRedundant); "" for none. The
	// plan leaves out the datapaths without it; Validate refuses a
	// scenario none of whose datapaths has it.
	Needs string
}
