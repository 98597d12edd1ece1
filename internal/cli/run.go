package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/report"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/version"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "scenario file")
	out := fs.String("out", "", "run directory (default runs/NAME-TIME)")
	resume := fs.String("resume", "", "continue the interrupted run in this directory")
	var ov scenario.Overrides
	fs.DurationVar(&ov.Duration, "duration", 0, "override each trial's measured duration")
	fs.IntVar(&ov.Reps, "reps", 0, "override the number of repetitions")
	fs.StringVar(&ov.Image, "image", "", "Kubernetes sites: the agent image (override the file's image:)")
	fs.StringVar(&ov.ServerImage, "server-image", "", "Kubernetes sites: the image nginx runs from (override the file's server_image:)")
	dps := fs.String("datapath", "", "comma-separated datapaths to run (override the file's)")
	wls := fs.String("workload", "", "comma-separated workload types to run (override the file's)")
	seed := fs.Int64("seed", 0, "order trials with this seed (default: random, recorded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ov.Datapaths, ov.Workloads = splitList(*dps), splitList(*wls)
	if (*file == "") == (*resume == "") {
		fmt.Fprintln(stderr, "spanperf run: give exactly one of -f FILE or --resume DIR")
		return 2
	}
	if err := requireRoot(); err != nil {
		fmt.Fprintln(stderr, "spanperf run:", err)
		return 1
	}
	var (
		dir *results.RunDir
		s   *scenario.Scenario
		err error
	)
	if *resume != "" {
		dir, s, err = reopen(*resume)
	} else {
		dir, s, err = create(*file, *out, ov, *seed)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer dir.Close()
	done := map[string]bool{}
	if recs, err := dir.Records(); err == nil {
		for _, r := range recs {
			done[r.TrialKey()] = true
		}
	} else {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "spanperf run %s: %d trials (%d recorded already) → %s\n",
		dir.Manifest.Run, dir.Manifest.Trials, len(done), dir.Dir)
	runErr := runner.Run(ctx, runner.Options{
		Scenario: s, Dir: dir, Seed: dir.Manifest.Seed, Done: done, Progress: stderr,
	})
	dir.Manifest.End = time.Now().UTC()
	dir.Manifest.Interrupted = runErr != nil
	if err := dir.WriteManifest(); err != nil {
		fmt.Fprintln(stderr, "spanperf run:", err)
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			fmt.Fprintf(stderr, "\ninterrupted: the records taken are kept in %s; continue with: spanperf run --resume %s\n", dir.Dir, dir.Dir)
			return 130
		}
		fmt.Fprintf(stderr, "spanperf run: %v\n(records kept in %s; continue with: spanperf run --resume %s)\n", runErr, dir.Dir, dir.Dir)
		return 1
	}
	return printSummary(stdout, stderr, dir.Dir, s)
}

func printSummary(stdout, stderr io.Writer, dir string, s *scenario.Scenario) int {
	recs, err := results.Load(dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	scenarioOrder(recs, s)
	fmt.Fprintf(stdout, "\n%s: %d trials, records in %s\n\n", s.Name, len(recs), dir)
	if err := report.Summary(stdout, recs, report.SummaryOptions{Baseline: s.Baseline, Datapaths: labels(s), Metrics: s.SummaryMetrics}); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Sweeps of a paced workload over CPU limits also get a sizing table,
	// with the baseline at the same rates beside it.
	var sizing bytes.Buffer
	sopts := report.SizingOptions{Baseline: s.Baseline, Cells: report.SizingCells(s.SizingCells)}
	if printed, err := report.Sizing(&sizing, recs, sopts); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	} else if printed {
		fmt.Fprintf(stdout, "\n%s", sizing.Bytes())
	}
	return 0
}

// scenarioOrder sorts records into the scenario's order (datapaths, then
// workloads and their points), not the shuffled order the trials ran in.
func scenarioOrder(recs []results.Record, s *scenario.Scenario) {
	rank := map[string]int{}
	for _, p := range s.Points() {
		rank[p.Workload+"|"+p.Params.Key()] = len(rank)
	}
	// A datapath that no limit applies to runs points without limits.
	for _, d := range s.Datapaths {
		for _, p := range s.PointsOf(d.Label) {
			if _, ok := rank[p.Workload+"|"+p.Params.Key()]; !ok {
				rank[p.Workload+"|"+p.Params.Key()] = len(rank)
			}
		}
	}
	dp := map[string]int{}
	for i, d := range s.Datapaths {
		dp[d.Label] = i
	}
	sort.SliceStable(recs, func(i, j int) bool {
		ri, rj := rank[recs[i].Workload+"|"+recs[i].Params.Key()], rank[recs[j].Workload+"|"+recs[j].Params.Key()]
		if ri != rj {
			return ri < rj
		}
		return dp[recs[i].Datapath] < dp[recs[j].Datapath]
	})
}

func labels(s *scenario.Scenario) []string {
	var out []string
	for _, d := range s.Datapaths {
		out = append(out, d.Label)
	}
	return out
}

// loadScenario reads and parses a scenario file, then applies overrides.
func loadScenario(file string, src []byte, ov scenario.Overrides) (*scenario.Scenario, error) {
	cat := plugins.Catalog{}
	s, err := scenario.Parse(file, src, cat)
	if err != nil {
		return nil, err
	}
	if err := s.Apply(ov, cat); err != nil {
		return nil, err
	}
	return s, nil
}

func create(file, out string, ov scenario.Overrides, seed int64) (*results.RunDir, *scenario.Scenario, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("spanperf run: %w", err)
	}
	s, err := loadScenario(file, src, ov)
	if err != nil {
		return nil, nil, err
	}
	if seed == 0 {
		seed = s.Seed
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	run := runner.NewID()
	if out == "" {
		out = filepath.Join("runs", fmt.Sprintf("%s-%s", s.Name, time.Now().Format("20060102-150405")))
	}
	ovj, _ := json.Marshal(ov)
	sj, _ := json.Marshal(s)
	trials := 0
	for _, g := range runner.Plan(s, seed) {
		trials += len(g.Trials)
	}
	emu, err := runner.WANEmulator(s)
	if err != nil {
		return nil, nil, fmt.Errorf("wan: %w", err)
	}
	m := results.Manifest{
		Run: run, WANEmulator: emu, Version: version.Version, Revision: version.Revision,
		ScenarioFile: file, ScenarioSource: string(src), Overrides: ovj, Scenario: sj,
		Seed: seed, Trials: trials, Host: hostInfo(), Start: time.Now().UTC(),
	}
	dir, err := results.Create(out, m)
	return dir, s, err
}

func reopen(path string) (*results.RunDir, *scenario.Scenario, error) {
	dir, err := results.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("spanperf run --resume: %w", err)
	}
	var ov scenario.Overrides
	if len(dir.Manifest.Overrides) > 0 {
		if err := json.Unmarshal(dir.Manifest.Overrides, &ov); err != nil {
			dir.Close()
			return nil, nil, fmt.Errorf("spanperf run --resume: overrides: %w", err)
		}
	}
	s, err := loadScenario(dir.Manifest.ScenarioFile, []byte(dir.Manifest.ScenarioSource), ov)
	if err != nil {
		dir.Close()
		return nil, nil, err
	}
	dir.Manifest.End, dir.Manifest.Interrupted = time.Time{}, false
	return dir, s, nil
}

func cmdSummary(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: spanperf summary RUN_DIR")
		return 2
	}
	// Read-only: a torn last line is skipped, not cut (only resume repairs it).
	m, err := results.ReadManifest(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "spanperf summary:", err)
		return 1
	}
	var ov scenario.Overrides
	json.Unmarshal(m.Overrides, &ov)
	s, err := loadScenario(m.ScenarioFile, []byte(m.ScenarioSource), ov)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return printSummary(stdout, stderr, args[0], s)
}

func requireRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (it creates network namespaces and links)")
	}
	return nil
}
