package report

import (
	"fmt"

	"github.com/spanperf/spanperf/internal/results"
)

// Run is one run directory loaded for reporting: its manifest and records.
type Run struct {
	// Dir is the run directory's path, used as the run's label.
	Dir string
	// Manifest describes the run (scenario, host, versions, times).
	Manifest results.Manifest
	// Records are the run's trials in file order.
	Records []results.Record
}

// LoadRun reads a run directory.
func LoadRun(dir string) (Run, error) {
	d, err := results.Open(dir)
	if err != nil {
		return Run{}, fmt.Errorf("report: %w", err)
	}
	defer d.Close()
	recs, err := d.Records()
	if err != nil {
		return Run{}, fmt.Errorf("report: %w", err)
	}
	return Run{Dir: dir, Manifest: d.Manifest, Records: recs}, nil
}
