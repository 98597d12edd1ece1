package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names inside a run directory.
const (
	ManifestFile = "manifest.json"
	RecordsFile  = "records.jsonl"
)

// Host describes the machine a run ran on.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpu_model"`
	Cores    int    `json:"cores"`
	MemBytes uint64 `json:"mem_bytes"`
}

// Manifest describes a run: what was asked, where, by which spanperf.
type Manifest struct {
	// Run is the run's ID.
	Run string `json:"run"`
	// WANEmulator is what emulated the wan's delay, jitter and loss:
	// "netem" or "userspace"; empty when the scenario sets none.
	WANEmulator string `json:"wan_emulator,omitempty"`
	// Version and Revision of spanperf.
	Version  string `json:"version"`
	Revision string `json:"revision"`
	// ScenarioFile is the path of the scenario; ScenarioSource its text, so
	// a resume re-reads exactly what the run read.
	ScenarioFile   string `json:"scenario_file"`
	ScenarioSource string `json:"scenario_source"`
	// Overrides are the command-line overrides applied (scenario.Overrides).
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// Scenario is the normalized scenario, for readers.
	Scenario json.RawMessage `json:"scenario"`
	// Seed ordered the trials.
	Seed int64 `json:"seed"`
	// Trials is the number of trials planned.
	Trials int       `json:"trials"`
	Host   Host      `json:"host"`
	Start  time.Time `json:"start"`
	// End is zero until the run finishes.
	End time.Time `json:"end,omitzero"`
	// Interrupted is set when the run stopped before its plan was done.
	Interrupted bool `json:"interrupted,omitempty"`
}

// RunDir is a run directory open for appending records.
type RunDir struct {
	Dir      string
	Manifest Manifest
	mu       sync.Mutex
	f        *os.File
}

// Create makes dir (which must not hold a run already) and writes m.
func Create(dir string, m Manifest) (*RunDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return nil, fmt.Errorf("run dir %s already holds a run (use --resume %s, or another --out)", dir, dir)
	}
	d := &RunDir{Dir: dir, Manifest: m}
	if err := d.WriteManifest(); err != nil {
		return nil, err
	}
	return d, d.open()
}

// Open opens an existing run directory to append to it (resume). It cuts
// a torn last line of the records file, so only the writer of a run may
// call it: readers use ReadManifest and Load, which change nothing.
func Open(dir string) (*RunDir, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	d := &RunDir{Dir: dir, Manifest: m}
	return d, d.open()
}

// ReadManifest reads the manifest of run directory dir. It opens nothing
// for writing: it works on a read-only directory, as any user who may read
// it, and beside a run still writing to it.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, fmt.Errorf("run dir: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return m, nil
}

func (d *RunDir) open() error {
	p := filepath.Join(d.Dir, RecordsFile)
	// A crash mid-write can leave a torn last line; cut it so appends start
	// clean. Readers skip such a line (Decode) and leave it alone: it may be
	// a record a live run is writing.
	if b, err := os.ReadFile(p); err == nil && len(b) > 0 && b[len(b)-1] != '\n' {
		if err := os.Truncate(p, int64(bytes.LastIndexByte(b, '\n')+1)); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	d.f = f
	return nil
}

// Append writes r as one line and syncs it to disk before returning.
func (d *RunDir) Append(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("append record: %w", err)
	}
	return d.f.Sync()
}

// WriteManifest replaces the manifest atomically.
func (d *RunDir) WriteManifest() error {
	b, err := json.MarshalIndent(d.Manifest, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(d.Dir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.Dir, ManifestFile))
}

// Records reads every record written so far.
func (d *RunDir) Records() ([]Record, error) { return ReadFile(filepath.Join(d.Dir, RecordsFile)) }

// Close closes the records file.
func (d *RunDir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// ReadFile reads records from a JSON-lines file; a missing file has none.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := Decode(f)
	if err != nil {
		return recs, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// Decode reads JSON-lines records. A torn last line (no newline, bad JSON)
// is dropped; a bad line elsewhere is an error naming its line number.
func Decode(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	var out []Record
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var rec Record
			if jerr := json.Unmarshal(b, &rec); jerr != nil {
				if err == io.EOF { // torn last line
					return out, nil
				}
				return out, fmt.Errorf("line %d: %w", line, jerr)
			}
			out = append(out, rec)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// Load reads the records of a run directory, or of a records file.
func Load(path string) ([]Record, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, RecordsFile)
	}
	return ReadFile(path)
}
