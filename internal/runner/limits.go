package runner

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/cgroup"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/workload"
)

// componentCgroups holds a cgroup for each datapath process of a link:
// it applies each trial's CPU limits and measures the CPU each group used.
type componentCgroups struct {
	comps []results.Component
	// groups maps a component's name to its cgroup.
	groups map[string]*cgroup.Cgroup
	// missing maps the name of a component with a process but no cgroup
	// to the reason.
	missing map[string]string
}

// newComponentCgroups puts the process tree of every component with a
// process in a cgroup of its own, spanperf-RUN/NAME, recorded in ledger. A
// component that cannot have one (no CPU cgroups on this machine, a process
// gone) is noted as missing, so its trials say why they lack
// cgroup_cpu_cores and fail if they limit it.
func newComponentCgroups(run string, ledger *testbed.Ledger, comps []results.Component) *componentCgroups {
	c := &componentCgroups{comps: comps, groups: map[string]*cgroup.Cgroup{}, missing: map[string]string{}}
	used := map[string]bool{}
	for _, comp := range comps {
		if comp.PID <= 0 {
			continue
		}
		leaf := cgroupName(comp.Name)
		for i := 2; used[leaf]; i++ {
			leaf = fmt.Sprintf("%s-%d", cgroupName(comp.Name), i)
		}
		used[leaf] = true
		cg, err := cgroup.New(cgroup.Spec{Path: "spanperf-" + run + "/" + leaf, Ledger: ledger})
		if err == nil {
			if err = cg.AddTree(comp.PID); err != nil {
				err = errors.Join(err, cg.Close())
			}
		}
		if err != nil {
			c.missing[comp.Name] = err.Error()
			continue
		}
		c.groups[comp.Name] = cg
	}
	return c
}

// cgroupName makes a component name a cgroup directory name.
func cgroupName(name string) string {
	b := []byte(name)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("._@-", ch) >= 0) {
			b[i] = '_'
		}
	}
	if s := string(b); s != "" && s != "." && s != ".." {
		return s
	}
	return "component"
}

// Close moves the processes out of every cgroup and removes them.
func (c *componentCgroups) Close() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.groups)) {
		errs = append(errs, c.groups[name].Close())
	}
	return errors.Join(errs...)
}

// limits returns the CPU limit, in cores, of each component that params
// (a trial's matrix point) limits. A key names the components whose name
// or role it is; a name key wins over a role key. A key that names no
// component, or only the kernel, is an error.
func (c *componentCgroups) limits(params results.Params) (map[string]float64, error) {
	return limitsOf(c.comps, params, "process", func(comp results.Component) bool { return comp.PID > 0 })
}

// limitsOf is the CPU limit, in cores, of each of comps that params
// limits and that can be limited (limitable: a process, or a pod). A key
// names the components whose name or role it is; a name key wins over a
// role key. A key that names no component, or none that can be limited
// (what: "process" or "pod"), is an error.
func limitsOf(comps []results.Component, params results.Params, what string, limitable func(results.Component) bool) (map[string]float64, error) {
	c := &componentCgroups{comps: comps}
	byName := map[string]float64{}
	byRole := map[string]float64{}
	var errs []error
	for _, pname := range slices.Sorted(maps.Keys(params)) {
		key, ok := results.ParseCPULimitParam(pname)
		if !ok {
			continue
		}
		cores, ok := number(params[pname])
		if !ok || !(cores > 0) {
			errs = append(errs, fmt.Errorf("limits.%s.cpu: %v is not a number of cores > 0", key, params[pname]))
			continue
		}
		matched, withProcess := 0, 0
		for _, comp := range c.comps {
			switch {
			case comp.Name == key:
				byName[comp.Name] = cores
			case comp.Role == key:
				if _, ok := byRole[comp.Name]; !ok {
					byRole[comp.Name] = cores
				}
			default:
				continue
			}
			matched++
			if limitable(comp) {
				withProcess++
			}
		}
		switch {
		case matched == 0:
			errs = append(errs, fmt.Errorf("limits.%s: no component of this datapath has that name or role (components: %s)", key, c.describe()))
		case withProcess == 0:
			errs = append(errs, fmt.Errorf("limits.%s: names only kernel work, which has no %s to limit", key, what))
		}
	}
	out := byRole
	maps.Copy(out, byName)
	for _, comp := range c.comps {
		if _, ok := out[comp.Name]; ok && !limitable(comp) {
			delete(out, comp.Name)
		}
	}
	return out, errors.Join(errs...)
}

// describe lists the components as "name (role)".
func (c *componentCgroups) describe() string {
	var parts []string
	for _, comp := range c.comps {
		parts = append(parts, comp.Name+" ("+comp.Role+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// number converts a parameter value (float64, or a whole number) to float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

// apply sets the CPU limit of every cgroup: the trial's limit for the
// components params limits, none for the others (a previous trial may have
// limited them). It returns the limits it set, by component name.
func (c *componentCgroups) apply(params results.Params) (map[string]float64, error) {
	lim, err := c.limits(params)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(lim)) {
		if _, ok := c.groups[name]; !ok {
			errs = append(errs, fmt.Errorf("cannot limit %s: no cgroup: %s", name, c.missing[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.groups)) {
		if err := c.groups[name].SetCPULimit(lim[name]); err != nil {
			errs = append(errs, fmt.Errorf("limit %s: %w", name, err))
		}
	}
	return lim, errors.Join(errs...)
}

// run runs one trial (run) under its limits, and adds to its record the
// limit and the cgroup CPU of each component over the window the trial
// marks by calling measure (workload.Env.Measure). A trial whose limits
// cannot be applied is not run: its record carries the error.
func (c *componentCgroups) run(o Options, t Trial, run func(measure workload.MeasureFunc) results.Record) results.Record {
	lim, err := c.apply(t.Point.Params)
	if err != nil {
		rec := newRecord(o, t, time.Now())
		rec.Components = c.comps
		rec.End, rec.Error = time.Now(), err.Error()
		return rec
	}
	m := c.newMeter()
	rec := run(m.start)
	m.stop()
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	for name, cores := range lim {
		rec.Metrics[results.For(results.CPULimitCores, name)] = cores
	}
	if rec.Error != "" {
		return rec
	}
	miss := maps.Clone(c.missing)
	for name := range c.groups {
		if cores, why := m.cores(name); why != "" {
			miss[name] = why
		} else {
			rec.Metrics[results.For(results.CgroupCPUCores, name)] = cores
		}
	}
	for name, why := range miss {
		if rec.Missing == nil {
			rec.Missing = map[string]string{}
		}
		rec.Missing[results.For(results.CgroupCPUCores, name)] = why
	}
	return rec
}

// meter reads the cgroups' CPU usage when the trial's measured window
// begins and when it ends (or the trial, if sooner): the window the
// workload marks when it starts its measured client (start).
type meter struct {
	groups  map[string]*cgroup.Cgroup
	once    sync.Once
	started chan struct{}
	quit    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	t0, t1 time.Time
	u0, u1 map[string]time.Duration
	errs   map[string]error
}

func (c *componentCgroups) newMeter() *meter {
	return &meter{groups: c.groups, started: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{}), errs: map[string]error{}}
}

// start begins the window: the first reading warmup from now, the last
// duration later. Calls after the first are ignored.
func (m *meter) start(warmup, duration time.Duration) {
	m.once.Do(func() {
		close(m.started)
		if len(m.groups) == 0 {
			close(m.done)
			return
		}
		go m.run(warmup, duration)
	})
}

func (m *meter) run(warmup, duration time.Duration) {
	defer close(m.done)
	if warmup > 0 {
		t := time.NewTimer(warmup)
		select {
		case <-t.C:
		case <-m.quit:
			t.Stop()
			return
		}
	}
	m.read(&m.t0, &m.u0)
	t := time.NewTimer(duration)
	select {
	case <-t.C:
	case <-m.quit:
		t.Stop()
	}
	m.read(&m.t1, &m.u1)
}

// read takes one reading of every group into u, at time *at.
func (m *meter) read(at *time.Time, u *map[string]time.Duration) {
	vals := map[string]time.Duration{}
	now := time.Now()
	for name, cg := range m.groups {
		v, err := cg.Usage()
		if err != nil {
			m.mu.Lock()
			m.errs[name] = err
			m.mu.Unlock()
			continue
		}
		vals[name] = v
	}
	m.mu.Lock()
	*at, *u = now, vals
	m.mu.Unlock()
}

// stop ends the measurement: a window not ended by its timer ends now.
func (m *meter) stop() {
	close(m.quit)
	select {
	case <-m.started:
		<-m.done
	default:
	}
}

// cores returns the CPU of group name over the window, or why there is none.
func (m *meter) cores(name string) (float64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.errs[name]; err != nil {
		return 0, err.Error()
	}
	select {
	case <-m.started:
	default:
		return 0, "not measured: the workload marked no measured window"
	}
	if m.u0 == nil {
		return 0, "the trial ended before its warmup did"
	}
	dt := m.t1.Sub(m.t0).Seconds()
	u0, ok0 := m.u0[name]
	u1, ok1 := m.u1[name]
	if !ok0 || !ok1 || dt <= 0 {
		return 0, "no usage reading at both ends of the window"
	}
	return (u1 - u0).Seconds() / dt, ""
}
