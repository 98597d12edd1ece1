package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

// TestShippedSizingReference loads the Skupper sizing guide's figures
// shipped in examples/reference and shows them in the connections section
// of a run that measured memory per connection, labelled as a different
// testbed.
func TestShippedSizingReference(t *testing.T) {
	ref, err := ReadReferenceFile(filepath.Join("..", "..", "examples", "reference", "skupper-sizing.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// The guide's memory table: 512 MiB per 8192 connections, doubling
	// up to 64 GiB for 1,048,576.
	if len(ref) != 8 {
		t.Fatalf("%d rows, want the guide's 8", len(ref))
	}
	for i, r := range ref {
		if want := 8192 << i; r.Threads != want || r.Value != float64(int(512)<<i) || r.Unit != "MiB" || r.Workload != "connections" {
			t.Errorf("row %d: %+v, want %d MiB at %d connections", i, r, 512<<i, want)
		}
	}
	var recs []results.Record
	for i, n := range []float64{1000, 4000} {
		for _, dp := range []string{"native", "mtls-relay"} {
			recs = append(recs, results.Record{Run: "r1", Trial: len(recs), Datapath: dp, Workload: "connections",
				Params:  results.Params{"count": int64(n)},
				Metrics: map[string]float64{results.OpenConnections: n, results.For(results.RSSBytes, "haproxy@a"): 8e6 + float64(i)*1e6}})
		}
	}
	var md bytes.Buffer
	if err := Markdown(&md, []Run{{Dir: "runs/r1", Records: recs}}, Options{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	at := strings.Index(out, "## connections")
	if at < 0 {
		t.Fatalf("no connections section:\n%s", out)
	}
	sec := out[at:]
	if next := strings.Index(sec[1:], "\n## "); next >= 0 {
		sec = sec[:next+1]
	}
	label := "**reference: Skupper router sizing guide, Sept. 2023 (router memory table, skupper.io v1 docs: Understanding Skupper sizing) (different testbed)**"
	if !strings.Contains(sec, label) || !strings.Contains(sec, "| Skupper router | connections |  | 8192 | router memory | 512 MiB |") {
		t.Errorf("connections section lacks the guide's figures:\n%s", sec)
	}
}
