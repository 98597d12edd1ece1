package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSizingHTTPThroughCLI: spanperf run of paced HTTP/2 through
// mtls-relay with its relays limited, beside native, prints a sizing table
// for http whose last column is the unlimited baseline at the same rate,
// in average / maximum as sizing_cells asks.
func TestSizingHTTPThroughCLI(t *testing.T) {
	requireRoot(t)
	p := filepath.Join(t.TempDir(), "s.yaml")
	src := `name: http-sizing
datapaths: [native, mtls-relay]
baseline: native
limits: {relay: {cpu: [0.5]}}
sizing_cells: mean-max
workloads:
  - {type: http, protocol: http2, connections: 4, rate: 400}
repetitions: 1
duration: 1s
warmup: 200ms
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := spanperf(t, "run", "-f", p, "--out", filepath.Join(t.TempDir(), "run"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	_, table, ok := strings.Cut(out, "sizing: mtls-relay http ")
	if !ok {
		t.Fatalf("no sizing table for http:\n%s", out)
	}
	t.Logf("sizing: mtls-relay http %s", table)
	lines := strings.Split(table, "\n")
	if len(lines) < 4 {
		t.Fatalf("sizing table too short:\n%s", table)
	}
	if h := lines[1]; !strings.Contains(h, "relay 0.5") || !strings.HasSuffix(h, "native (no limit)") {
		t.Errorf("header %q, want relay 0.5 then native (no limit)", h)
	}
	row := lines[2]
	if !strings.HasPrefix(row, "400/s") || strings.Count(row, " / ") != 2 || strings.Contains(row, "failed") {
		t.Errorf("row %q, want 400/s and two cells of avg / max", row)
	}
	if !strings.Contains(table, "cells: latency average / maximum") {
		t.Errorf("no note on the cells:\n%s", table)
	}
	if r := residue(t); len(r) > 0 {
		t.Errorf("left behind: %v", r)
	}
}
