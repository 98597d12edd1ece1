package report

// Format names an output format of a report.
type Format string

// The formats a report can be written in.
const (
	FormatHTML     Format = "html"
	FormatMarkdown Format = "md"
	FormatCSV      Format = "csv"
	FormatJSON     Format = "json"
)

// Options controls the report renderers (HTML, Markdown, CSV, JSON). The
// zero value compares every datapath against the first one seen in each run
// and shows no reference figures.
type Options struct {
	// Baseline is the datapath label the others are compared against in
	// every run. Empty means, for HTML, each run's scenario baseline, and
	// for the other formats the first datapath in order of first appearance
	// over all runs (`spanperf report` fills it with the first run's
	// scenario baseline). It must appear in some run; a run without it
	// shows no changes ("–").
	Baseline string
	// Reference holds published or earlier figures, from ReadReference,
	// shown beside the runs' own and labelled as a different testbed. Nil
	// shows none.
	Reference []ReferenceRow
	// Title heads the report. Empty means "spanperf report".
	Title string
	// Metrics, when set, are the metrics the Markdown tables show for
	// every workload whose records carry some of them, instead of its
	// headline metrics (`spanperf report` fills it with the first run's
	// scenario key summary_metrics).
	Metrics []string
}

// Normalize fills in defaults: the title.
func (o *Options) Normalize() {
	if o.Title == "" {
		o.Title = "spanperf report"
	}
}

// ReferenceRow is one published or earlier figure, one line of a reference
// CSV file (see ReadReference).
type ReferenceRow struct {
	// Source names where the figure was published, e.g. a paper and its DOI.
	Source string `json:"source"`
	// Datapath is the datapath as the source names it.
	Datapath string `json:"datapath"`
	// Workload is the workload as the source names it, e.g. "TCP_STREAM".
	Workload string `json:"workload"`
	// MessageSize is the message size in bytes; 0 when the source gives none.
	MessageSize int `json:"message_size,omitempty"`
	// Threads is the number of parallel streams or clients; 0 when the
	// source gives none.
	Threads int `json:"threads,omitempty"`
	// Metric is the metric as the source names it, e.g. "throughput".
	Metric string `json:"metric"`
	// Value is the figure, in Unit.
	Value float64 `json:"value"`
	// Unit is the unit of Value as the source gives it, e.g. "Gbit/s"; may
	// be empty.
	Unit string `json:"unit,omitempty"`
	// Line is the line of the file the row was read from (1-based), for
	// messages.
	Line int `json:"-"`
}
