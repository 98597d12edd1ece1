package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spanperf/spanperf/internal/report"
	"github.com/spanperf/spanperf/internal/scenario"
)

// parseInterleaved parses fs from args where flags and positional arguments
// may be mixed, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "md", "output format: html, md, csv or json")
	out := fs.String("o", "", "write to this file instead of standard output")
	baseline := fs.String("baseline", "", "datapath the others are compared against (default: the first run's scenario baseline)")
	ref := fs.String("reference", "", "CSV of reference figures to show beside the run's own")
	dirs, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "usage: spanperf report RUN_DIR [RUN_DIR...] [--format html|md|csv|json] [-o FILE] [--baseline X] [--reference FILE.csv]")
		return 2
	}
	var render func(io.Writer, []report.Run, report.Options) error
	switch report.Format(*format) {
	case report.FormatHTML:
		render = report.HTML
	case report.FormatMarkdown:
		render = report.Markdown
	case report.FormatCSV:
		render = report.CSV
	case report.FormatJSON:
		render = report.JSON
	default:
		fmt.Fprintf(stderr, "spanperf report: unknown format %q (want html, md, csv or json)\n", *format)
		return 2
	}
	opts := report.Options{Baseline: *baseline}
	if *ref != "" {
		if opts.Reference, err = report.ReadReferenceFile(*ref); err != nil {
			fmt.Fprintln(stderr, "spanperf report:", err)
			return 1
		}
	}
	var runs []report.Run
	for _, d := range dirs {
		run, err := report.LoadRun(d)
		if err != nil {
			fmt.Fprintln(stderr, "spanperf report:", err)
			return 1
		}
		// Scenario order reads better than the shuffled order trials ran in.
		var ov scenario.Overrides
		json.Unmarshal(run.Manifest.Overrides, &ov)
		if sc, err := loadScenario(run.Manifest.ScenarioFile, []byte(run.Manifest.ScenarioSource), ov); err == nil {
			scenarioOrder(run.Records, sc)
		}
		runs = append(runs, run)
	}
	// The first run's scenario names its baseline (every format uses it)
	// and the metrics its tables show (summary_metrics).
	var sc struct {
		Baseline string   `json:"baseline"`
		Metrics  []string `json:"summary_metrics"`
	}
	if json.Unmarshal(runs[0].Manifest.Scenario, &sc) == nil {
		if opts.Baseline == "" {
			opts.Baseline = sc.Baseline
		}
		opts.Metrics = sc.Metrics
	}
	var buf bytes.Buffer
	if err := render(&buf, runs, opts); err != nil {
		fmt.Fprintln(stderr, "spanperf report:", err)
		return 1
	}
	if *out == "" {
		stdout.Write(buf.Bytes())
		return 0
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "spanperf report:", err)
		return 1
	}
	return 0
}

// parsePercent reads "5%", "5" or "0.5%" as a percentage.
func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("threshold %q: want a non-negative percentage such as 5%%", s)
	}
	return v, nil
}

// Exit statuses of spanperf compare.
const (
	compareOK           = 0 // no regression
	compareRegressed    = 1 // a regression
	compareInconclusive = 2 // likely worse, too few repetitions to test
	compareTrouble      = 3 // bad usage, or a run could not be read
)

const compareUsage = `usage: spanperf compare OLD_RUN_DIR NEW_RUN_DIR [--threshold 5%] [--allow-inconclusive]

Compares every datapath × workload × params point of OLD with a successful
trial against NEW, metric by metric: medians, change, a two-sided
Mann-Whitney U p-value adjusted for the number of tests (Benjamini–Hochberg)
and a verdict. It warns when the runs differ in host, duration, warmup or
spanperf version, and lists the warnings of the trials compared.

Exit status:
  0  no regression
  1  regression: a metric with a direction worse by more than the threshold
     with adjusted p < 0.05; a point or a metric with a direction that has
     successful trials in OLD and none in NEW; a larger share of failed
     trials, of trials with errors or timeouts, or of trials not sustained
  2  inconclusive: no regression, but a metric is likely worse: the test
     cannot decide (too few repetitions), yet every NEW value is worse than
     every OLD value by more than the threshold; 0 with --allow-inconclusive
  3  bad usage, a run directory that could not be read, or an OLD run with
     no successful trial to compare against

Flags:
`

func cmdCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	threshold := fs.String("threshold", "5%", "a worsening counts only when larger than this")
	allow := fs.Bool("allow-inconclusive", false, "exit 0, not 2, when a metric is likely worse but untestable")
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, compareUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	dirs, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return compareOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "spanperf compare: %v\n\n", err)
		printUsage(stderr)
		return compareTrouble
	}
	if len(dirs) != 2 {
		printUsage(stderr)
		return compareTrouble
	}
	pct, err := parsePercent(*threshold)
	if err != nil {
		fmt.Fprintln(stderr, "spanperf compare:", err)
		return compareTrouble
	}
	var runs [2]report.Run
	for i, d := range dirs {
		if runs[i], err = report.LoadRun(d); err != nil {
			fmt.Fprintln(stderr, "spanperf compare:", err)
			return compareTrouble
		}
	}
	opts := report.CompareOptions{ThresholdPct: pct}
	cmp := report.Compare(runs[0], runs[1], opts)
	if len(cmp.Changes) == 0 {
		fmt.Fprintf(stderr, "spanperf compare: %s has no successful trial to compare against\n", dirs[0])
		return compareTrouble
	}
	labels := report.RunLabels(runs[:])
	if labels[0] == labels[1] {
		labels = []string{"old", "new"}
	}
	if err := report.WriteComparison(stdout, labels[0], labels[1], cmp, opts); err != nil {
		fmt.Fprintln(stderr, "spanperf compare:", err)
		return compareTrouble
	}
	switch {
	case cmp.Regressed():
		return compareRegressed
	case cmp.Inconclusive() && !*allow:
		fmt.Fprintln(stderr, "spanperf compare: inconclusive: a metric is likely worse, with too few repetitions to test (exit 2; --allow-inconclusive exits 0)")
		return compareInconclusive
	}
	return compareOK
}
