package report

import (
	"fmt"
	"path/filepath"

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

// LoadRun reads a run directory, read-only: a torn last line (a run still
// writing, or killed mid-write) is skipped, not cut.
func LoadRun(dir string) (Run, error) {
	m, err := results.ReadManifest(dir)
	if err != nil {
		return Run{}, fmt.Errorf("report: %w", err)
	}
	recs, err := results.ReadFile(filepath.Join(dir, results.RecordsFile))
	if err != nil {
		return Run{}, fmt.Errorf("report: %w", err)
	}
	return Run{Dir: dir, Manifest: m, Records: recs}, nil
}
