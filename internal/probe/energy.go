package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultWattsPerCore is EnergyModel.WattsPerCore when left at zero: a
// rough figure for one busy core of a server CPU, net of idle power.
const DefaultWattsPerCore = 10

// EnergyModel estimates a machine's energy from its CPU time where RAPL
// cannot be read. It is linear:
//
//	joules = (IdleWatts + WattsPerCore × busy cores) × seconds
//
// where busy cores are machine-wide (results.CPUCoresBusy). With the
// defaults (IdleWatts 0, WattsPerCore 10) only the busy part is
// attributed, so the estimate is the energy the work cost on top of an
// idle machine, while RAPL measures everything the packages drew: the two
// are not comparable with each other.
type EnergyModel struct {
	// IdleWatts is what the machine draws when idle; default 0.
	IdleWatts float64 `json:"idle_watts"`
	// WattsPerCore is what one fully busy core adds; 0 means
	// DefaultWattsPerCore.
	WattsPerCore float64 `json:"watts_per_core"`
}

// Normalize fills in the default of WattsPerCore.
func (m *EnergyModel) Normalize() {
	if m.WattsPerCore == 0 {
		m.WattsPerCore = DefaultWattsPerCore
	}
}

// Validate reports a negative or non-finite value.
func (m EnergyModel) Validate() error {
	if !(m.IdleWatts >= 0) || m.IdleWatts > 1e9 {
		return fmt.Errorf("energy model: idle watts must be ≥ 0, got %v", m.IdleWatts)
	}
	if !(m.WattsPerCore >= 0) || m.WattsPerCore > 1e9 {
		return fmt.Errorf("energy model: watts per core must be ≥ 0, got %v", m.WattsPerCore)
	}
	return nil
}

// Joules is the model's energy for busyCores busy over secs seconds.
func (m EnergyModel) Joules(busyCores, secs float64) float64 {
	return (m.IdleWatts + m.WattsPerCore*busyCores) * secs
}

// DefaultPowercap is where Linux exposes RAPL energy counters.
const DefaultPowercap = "/sys/class/powercap"

// errNoRAPL says the machine has no RAPL zone to read.
var errNoRAPL = errors.New("no RAPL zones")

// zoneName matches the RAPL zones under a powercap root: intel-rapl:N (a
// package, or psys) and intel-rapl:N:M (a subzone: core, uncore, dram). The
// MMIO duplicate of the package zone (intel-rapl-mmio:N) does not match.
var zoneName = regexp.MustCompile(`^intel-rapl:[0-9]+(:[0-9]+)?$`)

// raplZone is one energy counter.
type raplZone struct {
	path string
	// max is max_energy_range_uj: the counter wraps to 0 after it.
	max uint64
}

// rapl accumulates the energy of the top-level RAPL zones across samples,
// so that a counter that wraps between two samples is counted right.
type rapl struct {
	zones []raplZone
	last  []uint64
	// total is the energy since the first sample, in µJ.
	total   uint64
	samples int
}

// openRAPL finds the zones to read under root (a powercap directory) and
// takes a first reading; it fails with errNoRAPL when there are none. The
// zones are every package (intel-rapl:N named package-*) and every dram
// subzone, whose energy the package's leaves out; core and uncore are
// inside the package's. Without a package zone, the platform zone (psys)
// is read instead: it covers the packages, so the two are never summed.
func openRAPL(root string) (*rapl, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s", errNoRAPL, root)
		}
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	var parts, psys []string
	for _, e := range ents {
		if !zoneName.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "name"))
		if err != nil {
			return nil, fmt.Errorf("rapl zone %s: %w", e.Name(), err)
		}
		name := strings.TrimSpace(string(b))
		sub := strings.Count(e.Name(), ":") == 2
		switch {
		case !sub && strings.HasPrefix(name, "package"), sub && name == "dram":
			parts = append(parts, dir)
		case !sub && name == "psys":
			psys = append(psys, dir)
		}
	}
	if len(parts) == 0 {
		parts = psys
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w under %s", errNoRAPL, root)
	}
	slices.Sort(parts)
	r := &rapl{}
	for _, dir := range parts {
		max, err := readUint(filepath.Join(dir, "max_energy_range_uj"))
		if err != nil {
			return nil, fmt.Errorf("rapl zone %s: %w", filepath.Base(dir), err)
		}
		r.zones = append(r.zones, raplZone{path: filepath.Join(dir, "energy_uj"), max: max})
	}
	r.last = make([]uint64, len(r.zones))
	if err := r.sample(); err != nil {
		return nil, err
	}
	return r, nil
}

// sample reads every zone and adds what each used since the last read.
func (r *rapl) sample() error {
	for i, z := range r.zones {
		v, err := readUint(z.path)
		if err != nil {
			return err
		}
		if r.samples > 0 {
			r.total += wrapDelta(r.last[i], v, z.max)
		}
		r.last[i] = v
	}
	r.samples++
	return nil
}

// joules is the energy since the first sample.
func (r *rapl) joules() float64 { return float64(r.total) / 1e6 }

// wrapDelta is how far a counter went from a to b, given that it wraps to
// 0 after max (0: unknown, then a wrap counts from 0 to b).
func wrapDelta(a, b, max uint64) uint64 {
	if b >= a {
		return b - a
	}
	if max < a {
		return b
	}
	return max - a + b
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}
