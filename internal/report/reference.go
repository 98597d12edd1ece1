package report

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// referenceColumns are the columns of a reference CSV file, in any order.
var referenceColumns = []string{"source", "datapath", "workload", "message_size", "threads", "metric", "value", "unit"}

// ReadReferenceFile reads a reference CSV file (see ParseReference); errors
// name the file and line.
func ReadReferenceFile(path string) ([]ReferenceRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer f.Close()
	return ParseReference(path, f)
}

// ParseReference reads reference figures from CSV: a header naming the
// columns source, datapath, workload, message_size, threads, metric, value
// and unit (in any order; unit may be left out), then one figure per line.
// message_size and threads are whole numbers or empty; value is a number.
// Errors read "NAME:LINE: column: problem", NAME being name.
func ParseReference(name string, r io.Reader) ([]ReferenceRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:1: empty file, want a header %s", name, strings.Join(referenceColumns, ","))
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("%s:1: %s: column given twice", name, h)
		}
		col[h] = i
	}
	for _, c := range referenceColumns {
		if _, ok := col[c]; !ok && c != "unit" {
			return nil, fmt.Errorf("%s:1: %s: missing column (want %s)", name, c, strings.Join(referenceColumns, ","))
		}
	}
	var rows []ReferenceRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, header has %d", name, line, len(rec), len(header))
		}
		get := func(c string) string {
			if i, ok := col[c]; ok {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		row := ReferenceRow{Source: get("source"), Datapath: get("datapath"), Workload: get("workload"),
			Metric: get("metric"), Unit: get("unit"), Line: line}
		for _, c := range []string{"source", "datapath", "workload", "metric", "value"} {
			if get(c) == "" {
				return nil, fmt.Errorf("%s:%d: %s: empty", name, line, c)
			}
		}
		if row.MessageSize, err = wholeNumber(get("message_size")); err != nil {
			return nil, fmt.Errorf("%s:%d: message_size: %w", name, line, err)
		}
		if row.Threads, err = wholeNumber(get("threads")); err != nil {
			return nil, fmt.Errorf("%s:%d: threads: %w", name, line, err)
		}
		if row.Value, err = strconv.ParseFloat(get("value"), 64); err != nil {
			return nil, fmt.Errorf("%s:%d: value: %q is not a number", name, line, get("value"))
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no reference rows", name)
	}
	return rows, nil
}

func wholeNumber(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return n, nil
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: column %d: %w", name, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// ReferenceLabel is how a reference source is labelled next to a run's own
// figures: "reference: SOURCE (different testbed)".
func ReferenceLabel(source string) string {
	return "reference: " + source + " (different testbed)"
}

// referenceWorkload maps a reference workload name to the spanperf workload
// it is shown beside: netperf/uperf names TCP_STREAM, TCP_RR and TCP_CRR to
// stream, rr and crr; anything else keeps its own name.
func referenceWorkload(w string) string {
	switch strings.ToUpper(strings.ReplaceAll(w, " ", "_")) {
	case "TCP_STREAM":
		return "stream"
	case "TCP_RR":
		return "rr"
	case "TCP_CRR":
		return "crr"
	}
	return w
}

// referenceSources lists the sources of rows in order of first appearance.
func referenceSources(rows []ReferenceRow) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Source] {
			seen[r.Source] = true
			out = append(out, r.Source)
		}
	}
	return out
}
