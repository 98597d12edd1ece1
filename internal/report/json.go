package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/stats"
)

// MetricSummary is the summary of one metric over the successful trials of
// one run × datapath × workload × params point.
type MetricSummary struct {
	// Run is the run's label (see RunLabels).
	Run string `json:"run"`
	// Datapath, Workload and Params (params.Key()) name the point.
	Datapath string `json:"datapath"`
	Workload string `json:"workload"`
	Params   string `json:"params"`
	// Metric is the metric's name.
	Metric string `json:"metric"`
	// N, Median, Lo, Hi, Confidence, Mean, Stddev and Warnings are those of
	// stats.Summarize over the metric's values in the successful trials.
	N          int      `json:"n"`
	Median     Float    `json:"median"`
	Lo         Float    `json:"lo"`
	Hi         Float    `json:"hi"`
	Confidence Float    `json:"confidence"`
	Mean       Float    `json:"mean"`
	Stddev     Float    `json:"stddev"`
	Warnings   []string `json:"warnings,omitempty"`
	// Trials and Failed count the point's trials and those that failed.
	Trials int `json:"trials"`
	Failed int `json:"failed,omitempty"`
	// DeltaPct is the change of Median against the baseline datapath's
	// median at the same point of the same run, in percent; nil for the
	// baseline itself and when it cannot be given.
	DeltaPct *Float `json:"delta_pct,omitempty"`
}

// Float is a float64 that marshals NaN and infinities as JSON null.
type Float float64

// MarshalJSON writes f as a JSON number, or null when it is not finite.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// RunLabels names runs for display: the base name of each run's directory,
// or the whole path when two runs share a base name.
func RunLabels(runs []Run) []string {
	out := make([]string, len(runs))
	count := map[string]int{}
	for _, r := range runs {
		count[filepath.Base(r.Dir)]++
	}
	for i, r := range runs {
		out[i] = filepath.Base(r.Dir)
		if count[out[i]] > 1 {
			out[i] = r.Dir
		}
	}
	return out
}

// layout orders what a report shows: workloads, their parameter points and
// the datapaths, each in order of first appearance over all runs.
type layout struct {
	labels    []string
	datapaths []string
	baseline  string
	workloads []string
	params    map[string][]string // workload → params keys
	recs      map[pointKey][]results.Record
}

type pointKey struct {
	run                        int
	workload, params, datapath string
}

func newLayout(runs []Run, opts Options) (*layout, error) {
	if len(runs) == 0 {
		return nil, errors.New("no runs")
	}
	l := &layout{labels: RunLabels(runs), params: map[string][]string{}, recs: map[pointKey][]results.Record{}}
	var all []results.Record
	for _, run := range runs {
		if len(run.Records) == 0 {
			return nil, fmt.Errorf("run %s: no records", run.Dir)
		}
		all = append(all, run.Records...)
	}
	l.datapaths = displayOrder(all, nil)
	l.baseline = opts.Baseline
	if l.baseline == "" {
		l.baseline = l.datapaths[0]
	}
	if !slices.Contains(l.datapaths, l.baseline) {
		return nil, fmt.Errorf("baseline %q is not among datapaths %s", l.baseline, strings.Join(l.datapaths, ", "))
	}
	for i, run := range runs {
		for _, r := range withOverBaseline(run.Records, l.baseline) {
			if !slices.Contains(l.workloads, r.Workload) {
				l.workloads = append(l.workloads, r.Workload)
			}
			k := r.Params.Key()
			if !slices.Contains(l.params[r.Workload], k) {
				l.params[r.Workload] = append(l.params[r.Workload], k)
			}
			pk := pointKey{i, r.Workload, k, r.Datapath}
			l.recs[pk] = append(l.recs[pk], r)
		}
	}
	return l, nil
}

// values returns the metric's values in the successful trials of recs.
func values(recs []results.Record, metric string) []float64 {
	var vs []float64
	for _, r := range recs {
		if r.Error != "" {
			continue
		}
		if v, ok := r.Metrics[metric]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// Summaries summarizes every metric of every run × datapath × workload ×
// params point, in the order of the report: run, workload, params,
// datapath, then metric name. Points where a metric has no value in any
// successful trial are left out.
func Summaries(runs []Run, opts Options) ([]MetricSummary, error) {
	l, err := newLayout(runs, opts)
	if err != nil {
		return nil, err
	}
	return l.summaries(), nil
}

func (l *layout) summaries() []MetricSummary {
	var out []MetricSummary
	for ri := range l.labels {
		for _, w := range l.workloads {
			for _, p := range l.params[w] {
				base := l.recs[pointKey{ri, w, p, l.baseline}]
				for _, d := range l.datapaths {
					recs := l.recs[pointKey{ri, w, p, d}]
					if len(recs) == 0 {
						continue
					}
					failed := 0
					names := map[string]bool{}
					for _, r := range recs {
						if r.Error != "" {
							failed++
							continue
						}
						for m := range r.Metrics {
							names[m] = true
						}
					}
					metrics := make([]string, 0, len(names))
					for m := range names {
						metrics = append(metrics, m)
					}
					sort.Strings(metrics)
					for _, m := range metrics {
						s := stats.Summarize(values(recs, m))
						if s.N == 0 {
							continue
						}
						ms := MetricSummary{Run: l.labels[ri], Datapath: d, Workload: w, Params: p, Metric: m,
							N: s.N, Median: Float(s.Median), Lo: Float(s.Lo), Hi: Float(s.Hi),
							Confidence: Float(s.Confidence), Mean: Float(s.Mean), Stddev: Float(s.Stddev),
							Warnings: s.Warnings, Trials: len(recs), Failed: failed}
						if d != l.baseline && m != results.CPUCoresOverBaseline {
							if b := stats.Summarize(values(base, m)); b.N > 0 {
								if c := stats.ChangePct(b.Median, s.Median); !math.IsNaN(c) && !math.IsInf(c, 0) {
									f := Float(c)
									ms.DeltaPct = &f
								}
							}
						}
						out = append(out, ms)
					}
				}
			}
		}
	}
	return out
}

// jsonReport is the document JSON writes.
type jsonReport struct {
	Runs      []jsonRun       `json:"runs"`
	Baseline  string          `json:"baseline"`
	Summaries []MetricSummary `json:"summaries"`
	Failures  []jsonFailure   `json:"failures,omitempty"`
	// Sizing holds every run's sizing tables (see Sizing), as data.
	Sizing    []SizingTable   `json:"sizing,omitempty"`
	Reference []jsonReference `json:"reference,omitempty"`
}

type jsonRun struct {
	Label    string       `json:"label"`
	Dir      string       `json:"dir"`
	ID       string       `json:"id"`
	Scenario string       `json:"scenario_file,omitempty"`
	Version  string       `json:"version,omitempty"`
	Host     results.Host `json:"host"`
	Records  int          `json:"records"`
	Warnings []string     `json:"warnings,omitempty"`
}

type jsonFailure struct {
	Run        string `json:"run"`
	Datapath   string `json:"datapath"`
	Workload   string `json:"workload"`
	Params     string `json:"params"`
	Trials     int    `json:"trials"`
	Failed     int    `json:"failed"`
	FirstError string `json:"first_error"`
}

type jsonReference struct {
	Label string         `json:"label"`
	Rows  []ReferenceRow `json:"rows"`
}

// JSON writes the summaries of runs (see Summaries) as one indented JSON
// document: the runs (label, directory, ID, host, run-level warnings such
// as probes that did not measure and estimated energy), the baseline, the
// summaries, the failed trials per point, and the reference rows of
// opts.Reference grouped by source, each labelled with ReferenceLabel.
// Non-finite numbers are null.
func JSON(w io.Writer, runs []Run, opts Options) error {
	l, err := newLayout(runs, opts)
	if err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	doc := jsonReport{Baseline: l.baseline, Summaries: l.summaries()}
	for i, run := range runs {
		doc.Runs = append(doc.Runs, jsonRun{Label: l.labels[i], Dir: run.Dir, ID: run.Manifest.Run,
			Scenario: run.Manifest.ScenarioFile, Version: run.Manifest.Version, Host: run.Manifest.Host,
			Records: len(run.Records), Warnings: runWarnings(run)})
	}
	doc.Failures = l.failures()
	for i, run := range runs {
		tables, err := SizingTables(run.Records, SizingOptions{Baseline: l.baseline, Cells: SizingCells(scenarioOf(run).SizingCells)})
		if err != nil {
			return fmt.Errorf("json report: %s: %w", l.labels[i], err)
		}
		for _, t := range tables {
			t.Run = l.labels[i]
			doc.Sizing = append(doc.Sizing, t)
		}
	}
	for _, src := range referenceSources(opts.Reference) {
		ref := jsonReference{Label: ReferenceLabel(src)}
		for _, r := range opts.Reference {
			if r.Source == src {
				ref.Rows = append(ref.Rows, r)
			}
		}
		doc.Reference = append(doc.Reference, ref)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("json report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}

func (l *layout) failures() []jsonFailure {
	var out []jsonFailure
	for ri := range l.labels {
		for _, w := range l.workloads {
			for _, p := range l.params[w] {
				for _, d := range l.datapaths {
					recs := l.recs[pointKey{ri, w, p, d}]
					f := jsonFailure{Run: l.labels[ri], Datapath: d, Workload: w, Params: p, Trials: len(recs)}
					for _, r := range recs {
						if r.Error != "" {
							if f.Failed == 0 {
								f.FirstError = r.Error
							}
							f.Failed++
						}
					}
					if f.Failed > 0 {
						out = append(out, f)
					}
				}
			}
		}
	}
	return out
}

// runWarnings lists what weakens a whole run: metrics a probe did not
// measure (Record.Missing), energy estimated from CPU time and the trials'
// own warnings (Record.Warnings, by kind: the text before the first
// colon), each with the number of trials it applies to.
func runWarnings(run Run) []string {
	var out []string
	type miss struct {
		n      int
		reason string
	}
	missing := map[string]*miss{}
	var keys []string
	estimated := 0
	for _, r := range run.Records {
		for k, why := range r.Missing {
			if missing[k] == nil {
				missing[k] = &miss{reason: why}
				keys = append(keys, k)
			}
			missing[k].n++
		}
		if r.Metrics[results.EnergyEstimated] == 1 {
			estimated++
		}
	}
	sort.Strings(keys)
	n := len(run.Records)
	for _, k := range keys {
		out = append(out, fmt.Sprintf("probe did not measure %s in %d of %d trials: %s", k, missing[k].n, n, oneLine(missing[k].reason)))
	}
	if estimated > 0 {
		out = append(out, fmt.Sprintf("energy estimated from CPU time, not measured, in %d of %d trials", estimated, n))
	}
	out = append(out, trialWarnings(run.Records)...)
	return out
}

// trialWarnings lists the trials' own warnings (Record.Warnings) by kind,
// the text before the first colon: "foreign CPU in 2 of 12 trials, the
// first: …".
func trialWarnings(recs []results.Record) []string {
	type kind struct {
		n     int
		first string
	}
	var kinds []string
	warned := map[string]*kind{}
	for _, r := range recs {
		seen := map[string]bool{}
		for _, w := range r.Warnings {
			k := trialWarningKind(w)
			if seen[k] {
				continue
			}
			seen[k] = true
			if warned[k] == nil {
				warned[k] = &kind{first: w}
				kinds = append(kinds, k)
			}
			warned[k].n++
		}
	}
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s in %d of %d trials, the first: %s", strings.TrimPrefix(k, kindTrial), warned[k].n, len(recs), oneLine(warned[k].first)))
	}
	return out
}
