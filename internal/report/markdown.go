package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spanperf/spanperf/internal/results"
)

// Markdown writes runs as Markdown, for a README or a pull-request comment:
// a table of the runs, then per workload (in order of first appearance over
// all runs) a table with a row per parameter point × datapath and, for each
// run, a column group of the headline metrics Summary shows ("median [lo,
// hi]" with the unit FormatValue picks) each followed, when there are
// several datapaths, by its change against the baseline (Δ). With several
// runs each column is headed "RUN: metric". Failed trials are counted in
// the last column with the first error.
//
// Beside each workload, the rows of opts.Reference whose workload maps to
// it (TCP_STREAM → stream, TCP_RR → rr, TCP_CRR → crr; other names as
// given) are shown under the heading ReferenceLabel(source); reference rows
// of workloads no run has follow in sections of their own.
//
// A "Warnings" section ends the report: the kinds of warning of
// stats.Summarize (high variance, fewer than 3 repetitions, a confidence
// below 95%) and the trials' own warnings (such as foreign CPU load), each
// with the marker its cells carry (or stated once for every cell), then,
// per run, probes that did not measure and estimated energy, and a line
// naming the baseline.
func Markdown(w io.Writer, runs []Run, opts Options) error {
	opts.Normalize()
	l, err := newLayout(runs, opts)
	if err != nil {
		return fmt.Errorf("markdown report: %w", err)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# %s\n\n", mdEscape(opts.Title))
	writeRunsTable(&buf, l, runs)

	// One table per run × workload, so that markers are numbered over all
	// of them at once.
	nw := len(l.workloads)
	flat := make([]table, len(runs)*nw)
	metrics := make([][]string, nw)
	for wi, wl := range l.workloads {
		var wrecs []results.Record
		for ri := range runs {
			for _, p := range l.params[wl] {
				for _, d := range l.datapaths {
					wrecs = append(wrecs, l.recs[pointKey{ri, wl, p, d}]...)
				}
			}
		}
		metrics[wi] = chosenMetrics(opts.Metrics, wl, wrecs)
		for ri := range runs {
			t := table{workload: wl, metrics: metrics[wi]}
			for _, p := range l.params[wl] {
				var recs []results.Record
				for _, d := range l.datapaths {
					recs = append(recs, l.recs[pointKey{ri, wl, p, d}]...)
				}
				t.groups = append(t.groups, buildGroup(p, recs, t.metrics, l.datapaths, l.baseline))
			}
			flat[ri*nw+wi] = t
		}
	}
	ns := assignMarkers(flat)
	compare := len(l.datapaths) > 1

	for wi, wl := range l.workloads {
		fmt.Fprintf(&buf, "## %s\n\n", mdEscape(wl))
		header := []string{"params", "datapath"}
		for ri := range runs {
			prefix := ""
			if len(runs) > 1 {
				prefix = l.labels[ri] + ": "
			}
			for _, m := range metrics[wi] {
				header = append(header, prefix+m)
				if compare && hasDelta(m) {
					header = append(header, prefix+"Δ")
				}
			}
		}
		header = append(header, "failed")
		writeMDRow(&buf, header)
		sep := make([]string, len(header))
		for i := range sep {
			sep[i] = "---"
			if i >= 2 && i < len(header)-1 {
				sep[i] = "--:"
			}
		}
		writeMDRow(&buf, sep)
		for gi, p := range l.params[wl] {
			first := true
			for di, d := range l.datapaths {
				seen := false
				for ri := range runs {
					if flat[ri*nw+wi].groups[gi].rows[di].trials > 0 {
						seen = true
					}
				}
				if !seen {
					continue
				}
				params := ""
				if first {
					params = p
					if params == "" {
						params = "(none)"
					}
					first = false
				}
				line := []string{params, d}
				var failures []string
				for ri := range runs {
					rw := flat[ri*nw+wi].groups[gi].rows[di]
					for j, m := range metrics[wi] {
						c := rw.cells[j]
						text := "–"
						if c.s.N > 0 {
							text = formatInterval(m, c.s.Median, c.s.Lo, c.s.Hi)
							for _, k := range c.kinds {
								text += ns.marker[k]
							}
						}
						line = append(line, text)
						if compare && hasDelta(m) {
							line = append(line, deltaText(rw, c))
						}
					}
					if f := failureText(rw); f != "" {
						if len(runs) > 1 {
							f = l.labels[ri] + ": " + f
						}
						failures = append(failures, f)
					}
				}
				line = append(line, strings.Join(failures, "; "))
				writeMDRow(&buf, line)
			}
		}
		buf.WriteByte('\n')
		if wl == connectionsWorkload {
			for ri, run := range runs {
				writeConnectionFitsMD(&buf, l.labels[ri], run.Records)
			}
		}
		writeReference(&buf, opts.Reference, func(r ReferenceRow) bool { return referenceWorkload(r.Workload) == wl })
	}

	writeSizingMD(&buf, runs, l.labels, l.baseline)

	// Reference workloads that no run has.
	var extra []string
	for _, r := range opts.Reference {
		w := referenceWorkload(r.Workload)
		if !slices.Contains(l.workloads, w) && !slices.Contains(extra, w) {
			extra = append(extra, w)
		}
	}
	for _, wl := range extra {
		fmt.Fprintf(&buf, "## %s (reference only)\n\n", mdEscape(wl))
		writeReference(&buf, opts.Reference, func(r ReferenceRow) bool { return referenceWorkload(r.Workload) == wl })
	}

	writeLinesMD(&buf, runs, l.labels)

	buf.WriteString("## Warnings\n\n")
	for _, n := range ns.list {
		if n.marker == "" {
			fmt.Fprintf(&buf, "- %s\n", mdEscape(n.text))
		} else {
			fmt.Fprintf(&buf, "- %s %s\n", mdEscape(n.marker), mdEscape(n.text))
		}
	}
	for ri, run := range runs {
		marked := trialWarnings(run.Records) // the tables' markers say these
		for _, wr := range runWarnings(run) {
			if slices.Contains(marked, wr) {
				continue
			}
			if len(runs) > 1 {
				wr = l.labels[ri] + ": " + wr
			}
			fmt.Fprintf(&buf, "- %s\n", mdEscape(wr))
		}
	}
	if compare {
		fmt.Fprintf(&buf, "- Δ: change of the median against %s in the same run\n", mdEscape(l.baseline))
	}
	if slices.ContainsFunc(metrics, func(ms []string) bool { return slices.Contains(ms, results.CPUCoresOverBaseline) }) {
		fmt.Fprintf(&buf, "- %s: the trial's %s less the median of %s's at the same params in the same run\n",
			results.CPUCoresOverBaseline, results.CPUCoresPath, mdEscape(l.baseline))
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write markdown report: %w", err)
	}
	return nil
}

func writeRunsTable(buf *bytes.Buffer, l *layout, runs []Run) {
	writeMDRow(buf, []string{"run", "id", "scenario", "host", "kernel", "cpu", "trials", "start"})
	writeMDRow(buf, []string{"---", "---", "---", "---", "---", "---", "--:", "---"})
	for i, r := range runs {
		m := r.Manifest
		start := ""
		if !m.Start.IsZero() {
			start = m.Start.UTC().Format("2006-01-02 15:04 UTC")
		}
		writeMDRow(buf, []string{l.labels[i], m.Run, m.ScenarioFile, m.Host.Hostname, m.Host.Kernel,
			m.Host.CPUModel, strconv.Itoa(len(r.Records)), start})
	}
	buf.WriteByte('\n')
}

// writeSizingMD writes each run's sizing tables (see Sizing), if any, in a
// section of their own, with baseline's column and the cells the run's
// scenario asked for.
func writeSizingMD(buf *bytes.Buffer, runs []Run, labels []string, baseline string) {
	heading := false
	for ri, run := range runs {
		var tb bytes.Buffer
		opts := SizingOptions{Baseline: baseline, Cells: SizingCells(scenarioOf(run).SizingCells)}
		if ok, err := Sizing(&tb, run.Records, opts); err != nil || !ok {
			continue
		}
		if !heading {
			buf.WriteString("## Sizing\n\n")
			heading = true
		}
		if len(runs) > 1 {
			fmt.Fprintf(buf, "**%s**\n\n", mdEscape(labels[ri]))
		}
		buf.WriteString("```\n")
		buf.Write(tb.Bytes())
		buf.WriteString("```\n\n")
	}
}

// writeReference writes, per source, the reference rows keep selects.
func writeReference(buf *bytes.Buffer, rows []ReferenceRow, keep func(ReferenceRow) bool) {
	for _, src := range referenceSources(rows) {
		var sel []ReferenceRow
		for _, r := range rows {
			if r.Source == src && keep(r) {
				sel = append(sel, r)
			}
		}
		if len(sel) == 0 {
			continue
		}
		fmt.Fprintf(buf, "**%s**\n\n", mdEscape(ReferenceLabel(src)))
		writeMDRow(buf, []string{"datapath", "workload", "message_size", "threads", "metric", "value"})
		writeMDRow(buf, []string{"---", "---", "--:", "--:", "---", "--:"})
		for _, r := range sel {
			v := strconv.FormatFloat(r.Value, 'f', -1, 64)
			if r.Unit != "" {
				v += " " + r.Unit
			}
			writeMDRow(buf, []string{r.Datapath, r.Workload, optInt(r.MessageSize), optInt(r.Threads), r.Metric, v})
		}
		buf.WriteByte('\n')
	}
}

func optInt(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func writeMDRow(buf *bytes.Buffer, cells []string) {
	buf.WriteString("|")
	for _, c := range cells {
		buf.WriteString(" " + mdEscape(c) + " |")
	}
	buf.WriteByte('\n')
}

// mdEscape keeps text from breaking a Markdown table or line: pipes are
// escaped and whitespace runs, newlines included, become one space.
func mdEscape(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}
