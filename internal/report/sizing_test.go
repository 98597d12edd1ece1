package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// sizingRecords is a limits sweep of mtls-relay (relay CPU 0.25, 0.5, 1, 2
// at 1000, 2000 and 4000/s, 3 repetitions, in shuffled order) with records
// a sizing table must ignore around it: closed-loop rr (rate 0), stream, a
// paced point without limits. 0.25 CPU sustains only 1000/s, 0.5 up to
// 2000/s; one trial at 2 CPUs and 4000/s failed; 1 CPU at 4000/s sustains
// in two repetitions out of three (the median decides). A second datapath,
// limited on its gateway role at one rate, makes a second table.
func sizingRecords() []results.Record {
	var recs []results.Record
	add := func(dp, wl string, p results.Params, rep int, m map[string]float64, errText string) {
		recs = append(recs, results.Record{Run: "r1", Trial: len(recs), Datapath: dp, Workload: wl,
			Params: p, Rep: rep, Metrics: m, Error: errText})
	}
	rr := func(rate, cpu float64) results.Params {
		return results.Params{"concurrency": int64(8), "request_size": int64(64), "response_size": int64(64),
			"rate": rate, "limit.relay.cpu": cpu}
	}
	paced := func(target, achieved, p50, p99 float64) map[string]float64 {
		return map[string]float64{results.TargetRate: target, results.TransactionsPerS: achieved,
			results.LatencyP50: p50, results.LatencyP99: p99}
	}
	// capacity of the relay in transactions/s per CPU limit.
	capacity := map[float64]float64{0.25: 1150, 0.5: 2300, 1: 4100, 2: 9000}
	for rep := 0; rep < 3; rep++ {
		add("mtls-relay", "rr", results.Params{"concurrency": int64(8), "request_size": int64(64), "response_size": int64(64), "rate": float64(0), "limit.relay.cpu": 1.0},
			rep, map[string]float64{results.TransactionsPerS: 9000, results.LatencyP50: 800e-6, results.LatencyP99: 2e-3}, "")
		add("mtls-relay", "stream", results.Params{"message_size": int64(131072), "limit.relay.cpu": 1.0}, rep,
			map[string]float64{results.ThroughputBPS: 1e9}, "")
		add("native", "rr", results.Params{"concurrency": int64(8), "request_size": int64(64), "response_size": int64(64), "rate": 1000.0},
			rep, paced(1000, 1000, 30e-6, 90e-6), "")
		for _, rate := range []float64{4000, 1000, 2000} {
			for _, cpu := range []float64{2, 0.25, 1, 0.5} {
				j := float64(rep) // a little spread between repetitions
				achieved := min(rate, capacity[cpu]) * (1 - 0.001*j)
				load := rate / capacity[cpu]
				p50 := (120 + 200*load*load + 3*j) * 1e-6
				p99 := (400 + 3000*load*load*load + 10*j) * 1e-6
				switch {
				case rate == 4000 && cpu == 1 && rep == 1:
					achieved = 3700 // one repetition below 95%: the median still sustains
				case capacity[cpu] < rate:
					p50, p99 = 0.05+0.01*j, 0.4+0.02*j // queues grow when not sustained
				}
				if rate == 4000 && cpu == 2 && rep == 2 {
					add("mtls-relay", "rr", rr(rate, cpu), rep, nil, "rr client: connect: connection refused")
					continue
				}
				add("mtls-relay", "rr", rr(rate, cpu), rep, paced(rate, achieved, p50, p99), "")
			}
		}
		for _, cpu := range []float64{1, 0.5} {
			add("mesh-gateway", "rr", results.Params{"concurrency": int64(1), "request_size": int64(64), "response_size": int64(64),
				"rate": 500.0, "limit.gateway.cpu": cpu}, rep, paced(500, 500, 250e-6, 1.5e-3), "")
		}
	}
	// A cell whose every trial failed.
	add("mesh-gateway", "rr", results.Params{"concurrency": int64(1), "request_size": int64(64), "response_size": int64(64),
		"rate": 500.0, "limit.gateway.cpu": 0.25}, 0, nil, "timeout")
	return recs
}

func TestSizingGolden(t *testing.T) {
	var buf bytes.Buffer
	printed, err := Sizing(&buf, sizingRecords(), SizingOptions{})
	if err != nil || !printed {
		t.Fatalf("printed %v, err %v", printed, err)
	}
	golden := filepath.Join("testdata", "sizing.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("sizing differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

// Records read back from a run directory hold every number as float64:
// the table is the same.
func TestSizingAfterJSON(t *testing.T) {
	recs := sizingRecords()
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var back []results.Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var a, c bytes.Buffer
	if _, err := Sizing(&a, recs, SizingOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Sizing(&c, back, SizingOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.String() != c.String() {
		t.Errorf("after JSON:\n%s\nbefore:\n%s", c.String(), a.String())
	}
}

func TestSizingNothingToShow(t *testing.T) {
	var buf bytes.Buffer
	printed, err := Sizing(&buf, testRecords(), SizingOptions{}) // no rate, no limits
	if err != nil || printed || buf.Len() != 0 {
		t.Errorf("printed %v, err %v, output %q", printed, err, buf.String())
	}
	wantErr := errors.New("disk full")
	if _, err := Sizing(failWriter{wantErr}, sizingRecords(), SizingOptions{}); !errors.Is(err, wantErr) {
		t.Errorf("write failure: err = %v, want wrapping %v", err, wantErr)
	}
}

func TestIsCPULimitParam(t *testing.T) {
	for name, want := range map[string]bool{
		"limit.relay.cpu": true, "limit.wireguard-go@a.cpu": true, "limit.cpu": false,
		"limit..cpu": false, "limit.relay.memory": false, "rate": false, "xlimit.relay.cpu": false,
	} {
		if got := IsCPULimitParam(name); got != want {
			t.Errorf("IsCPULimitParam(%q) = %v, want %v", name, got, want)
		}
	}
}

// workloadSizingRecords is a limits sweep (relay CPU 0.5, 1 and 2 at three
// rates, 3 repetitions) of each paced workload, each recording its
// achieved rate under its own metric, beside the baseline datapath native
// at the same rates without a limit:
//
//   - http over HTTP/2, 10 connections, requests_per_s;
//   - pgbench select-only at rate, transactions_per_s, with pgbench's
//     realized offer (offered_per_s) a little off its target;
//   - rr, transactions_per_s;
//   - a workload the report knows nothing of ("messaging"), whose rate is
//     per connection over 4 connections, and whose records say the total
//     it offered in target_rate and achieved in transactions_per_s.
//
// Each relay limit carries capacity[cpu] × the workload's scale per
// second: above it the cell is not sustained. Latency grows with load;
// the mean lies between p50 and p99, the max above p99. One native trial
// of http failed.
func workloadSizingRecords() []results.Record {
	var recs []results.Record
	add := func(dp, wl string, p results.Params, rep int, m map[string]float64, errText string) {
		recs = append(recs, results.Record{Run: "r1", Trial: len(recs), Datapath: dp, Workload: wl,
			Params: p, Rep: rep, Metrics: m, Error: errText})
	}
	type shape struct {
		workload, rateMetric string
		params               results.Params
		rates                []float64
		perConn              float64 // target_rate = rate × perConn
		scale                float64 // capacity multiplier
	}
	shapes := []shape{
		{"http", results.RequestsPerS, results.Params{"protocol": "http2", "connections": int64(10), "body_size": int64(1024)},
			[]float64{1000, 2000, 4000}, 1, 1},
		{"pgbench", results.TransactionsPerS, results.Params{"clients": int64(8), "mode": "select-only"},
			[]float64{500, 1000, 2000}, 1, 0.5},
		{"rr", results.TransactionsPerS, results.Params{"concurrency": int64(8)},
			[]float64{1000, 2000, 4000}, 1, 1},
		{"messaging", results.TransactionsPerS, results.Params{"connections": int64(4), "pattern": "request-response"},
			[]float64{100, 200, 400}, 4, 0.4},
	}
	capacity := map[float64]float64{0.5: 1500, 1: 3000, 2: 6000}
	for _, sh := range shapes {
		for rep := 0; rep < 3; rep++ {
			j := float64(rep)
			metrics := func(target, achieved, load float64) map[string]float64 {
				m := map[string]float64{results.TargetRate: target, sh.rateMetric: achieved,
					results.LatencyP50: (100 + 200*load + j) * 1e-6, results.LatencyP99: (400 + 2000*load + 10*j) * 1e-6,
					results.LatencyMean: (150 + 300*load + j) * 1e-6, results.LatencyMax: (2000 + 8000*load + 100*j) * 1e-6}
				if sh.workload == "pgbench" {
					m[results.OfferedPerS] = target * 0.99
				}
				return m
			}
			for _, rate := range sh.rates {
				target := rate * sh.perConn
				p := results.Params{"rate": rate}
				for k, v := range sh.params {
					p[k] = v
				}
				if sh.workload == "http" && rate == 2000 && rep == 1 {
					add("native", sh.workload, p, rep, nil, "http client: connect: connection refused")
				} else {
					add("native", sh.workload, p, rep, metrics(target, target*(1-0.001*j), target/10000), "")
				}
				for _, cpu := range []float64{2, 0.5, 1} {
					q := results.Params{"limit.relay.cpu": cpu}
					for k, v := range p {
						q[k] = v
					}
					c := capacity[cpu] * sh.scale
					achieved, load := min(target, c)*(1-0.001*j), target/c
					m := metrics(target, achieved, load)
					if target > c {
						m[results.LatencyP50], m[results.LatencyP99] = 0.05+0.01*j, 0.4+0.02*j
						m[results.LatencyMean], m[results.LatencyMax] = 0.08+0.01*j, 0.9+0.02*j
					}
					add("mtls-relay", sh.workload, q, rep, m, "")
				}
			}
		}
	}
	return recs
}

// Every paced workload gets a table, with the baseline's column, in
// p50 / p99 and in average / max.
func TestSizingWorkloadsGolden(t *testing.T) {
	for _, tc := range []struct {
		cells  SizingCells
		golden string
	}{{"", "sizing_workloads.golden"}, {SizingMeanMax, "sizing_workloads_meanmax.golden"}} {
		var buf bytes.Buffer
		printed, err := Sizing(&buf, workloadSizingRecords(), SizingOptions{Baseline: "native", Cells: tc.cells})
		if err != nil || !printed {
			t.Fatalf("%s: printed %v, err %v", tc.golden, printed, err)
		}
		checkGolden(t, tc.golden, buf.Bytes())
	}
}

// The known answers behind the golden files, cell by cell: which cells
// sustain, what the row is labelled, and that the baseline column holds
// the baseline's own latency.
func TestSizingWorkloadsKnownAnswers(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Sizing(&buf, workloadSizingRecords(), SizingOptions{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	tables := map[string][]string{}
	var cur string
	for _, line := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "sizing: "):
			cur = strings.Fields(line)[2]
		case line == "":
			cur = ""
		case cur != "":
			tables[cur] = append(tables[cur], line)
		}
	}
	for _, wl := range []string{"http", "pgbench", "rr", "messaging"} {
		rows := tables[wl]
		if len(rows) != 4 {
			t.Errorf("%s: %d lines, want a header and 3 rates:\n%s", wl, len(rows), buf.String())
			continue
		}
		if h := rows[0]; !strings.Contains(h, "relay 0.5") || !strings.HasSuffix(h, "native (no limit)") {
			t.Errorf("%s: header %q, want limits ascending and the baseline last", wl, h)
		}
		// The rates are 2/3, 4/3 and 8/3 of 0.5 CPU's capacity: 0.5 CPU
		// sustains the first, 1 CPU the first two, 2 CPUs and the
		// baseline all three.
		for i, want := range []int{0, 1, 2} {
			if got := strings.Count(rows[1+i], "not sustained"); got != want {
				t.Errorf("%s: row %q has %d cells not sustained, want %d", wl, rows[1+i], got, want)
			}
		}
	}
	// messaging's rate is per connection: rows are labelled with the total.
	if got := strings.Fields(tables["messaging"][1])[0]; got != "400/s" {
		t.Errorf("messaging first row labelled %q, want 400/s (100/s × 4 connections)", got)
	}
	// native http at 1000/s, repetitions 0, 1, 2: p50 100 + 200 × 0.1 + j µs,
	// median 121 µs; p99 400 + 2000 × 0.1 + 10j µs, median 610 µs.
	if row := tables["http"][1]; !strings.HasSuffix(row, "121 µs / 610 µs") {
		t.Errorf("http 1000/s baseline cell: row %q, want it to end with 121 µs / 610 µs", row)
	}
	// One of native http's three trials at 2000/s failed.
	if row := tables["http"][2]; !strings.HasSuffix(row, "*") {
		t.Errorf("http 2000/s baseline cell: row %q, want a partly failed cell (*)", row)
	}
}

// A baseline with no records at the sweep's point, or the sweep's own
// datapath as baseline, adds no column.
func TestSizingNoBaselineColumn(t *testing.T) {
	for _, base := range []string{"", "mtls-relay", "wireguard"} {
		var buf bytes.Buffer
		if _, err := Sizing(&buf, workloadSizingRecords(), SizingOptions{Baseline: base}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "(no limit)") {
			t.Errorf("baseline %q: a baseline column:\n%s", base, buf.String())
		}
	}
	if _, err := Sizing(io.Discard, workloadSizingRecords(), SizingOptions{Cells: "p90"}); err == nil || !strings.Contains(err.Error(), `"p90"`) {
		t.Errorf("cells p90: err %v, want one naming it", err)
	}
}

func TestParseSizingCells(t *testing.T) {
	for in, want := range map[string]SizingCells{"": SizingP50P99, "p50-p99": SizingP50P99, "mean-max": SizingMeanMax} {
		if got, err := ParseSizingCells(in); err != nil || got != want {
			t.Errorf("ParseSizingCells(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSizingCells("avg"); err == nil {
		t.Error("avg: no error")
	}
}

// The Markdown report carries the same sizing tables, in a section of
// their own, with the baseline's column.
func TestSizingInMarkdown(t *testing.T) {
	var md, want bytes.Buffer
	run := Run{Dir: "runs/r1", Records: workloadSizingRecords()}
	if err := Markdown(&md, []Run{run}, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Sizing(&want, run.Records, SizingOptions{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Sizing\n\n```\n"+want.String()+"```\n") {
		t.Errorf("markdown lacks the sizing tables:\n%s", md.String())
	}
}

// The JSON report carries the sizing tables as data: the same cells as
// the printed ones, with the medians behind them.
func TestSizingInJSON(t *testing.T) {
	var out bytes.Buffer
	run := Run{Dir: "runs/r1", Records: workloadSizingRecords()}
	if err := JSON(&out, []Run{run}, Options{Baseline: "native"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sizing []SizingTable `json:"sizing"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want, err := SizingTables(run.Records, SizingOptions{Baseline: "native"})
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Sizing) != len(want) || len(want) != 4 {
		t.Fatalf("%d tables in the JSON, %d printed; want 4 (http, pgbench, rr, messaging)", len(doc.Sizing), len(want))
	}
	for _, tb := range doc.Sizing {
		if tb.Workload != "http" {
			continue
		}
		if tb.Run != "r1" || tb.Baseline != "native" || tb.Cells != "p50-p99" || len(tb.Rows) != 3 {
			t.Fatalf("http table %+v", tb)
		}
		// native http at 1000/s: p50 median 121 µs, p99 610 µs (see
		// TestSizingWorkloadsKnownAnswers); the 0.5-core cell holds 1000/s
		// and not 2000/s.
		base := tb.Rows[0].Cells[len(tb.Rows[0].Cells)-1]
		if base.LowS == nil || math.Abs(float64(*base.LowS)-121e-6) > 1e-9 || math.Abs(float64(*base.HighS)-610e-6) > 1e-9 || base.Text != "121 µs / 610 µs" {
			t.Errorf("baseline cell at 1000/s %+v, want 121 µs / 610 µs", base)
		}
		if c := tb.Rows[0].Cells[0]; c.Sustained == nil || !*c.Sustained {
			t.Errorf("relay 0.5 at 1000/s %+v, want sustained", c)
		}
		if c := tb.Rows[1].Cells[0]; c.Sustained == nil || *c.Sustained || !strings.HasPrefix(c.Text, "not sustained") {
			t.Errorf("relay 0.5 at 2000/s %+v, want not sustained", c)
		}
		if c := tb.Rows[1].Cells[len(tb.Rows[1].Cells)-1]; c.Failed != 1 || c.Trials != 3 {
			t.Errorf("baseline at 2000/s %+v, want 1 of 3 trials failed", c)
		}
	}
}
