package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/spanperf/spanperf/internal/results"
)

// cpuTimes are the USER_HZ tick counters of one "cpu" line of /proc/stat.
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

// busy is the time the CPU did work: user, nice, system, irq and softirq
// (guest time is already inside user and nice).
func (c cpuTimes) busy() uint64 { return c.user + c.nice + c.system + c.irq + c.softirq }

// sub returns c - o field by field; a counter that went backwards (a CPU
// taken offline and back) gives 0.
func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return cpuTimes{d(c.user, o.user), d(c.nice, o.nice), d(c.system, o.system), d(c.idle, o.idle),
		d(c.iowait, o.iowait), d(c.irq, o.irq), d(c.softirq, o.softirq), d(c.steal, o.steal)}
}

// cpuStat is one read of /proc/stat: the aggregate line and each CPU's.
type cpuStat struct {
	total cpuTimes
	// perCPU maps "cpu0", "cpu1", ... to their counters.
	perCPU map[string]cpuTimes
	// order lists perCPU's keys as the file does.
	order []string
}

// parseCPUStat parses the cpu lines of /proc/stat.
func parseCPUStat(b []byte) (cpuStat, error) {
	st := cpuStat{perCPU: map[string]cpuTimes{}}
	seenTotal := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if len(f) < 8 {
			return cpuStat{}, fmt.Errorf("/proc/stat %s: %d fields, want ≥ 8", f[0], len(f))
		}
		var v [8]uint64
		for i := range v {
			if 1+i >= len(f) {
				break // steal is absent on very old kernels
			}
			n, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return cpuStat{}, fmt.Errorf("/proc/stat %s field %d: %w", f[0], i+1, err)
			}
			v[i] = n
		}
		t := cpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
		if f[0] == "cpu" {
			st.total, seenTotal = t, true
		} else {
			st.perCPU[f[0]] = t
			st.order = append(st.order, f[0])
		}
	}
	if !seenTotal {
		return cpuStat{}, fmt.Errorf("/proc/stat: no aggregate cpu line")
	}
	return st, nil
}

// kernelMetrics turns two reads of /proc/stat, secs seconds apart, into
// machine-wide cores: results.CPUCoresUser (user+nice), CPUCoresSystem,
// CPUCoresIRQ, CPUCoresSoftirq, CPUCoresBusy, and the same five per CPU
// present in both reads, named For(CPUCoresUser, "cpuN"), ...: mpstat's
// view of the window.
func kernelMetrics(a, b cpuStat, hz, secs float64) map[string]float64 {
	cores := func(ticks uint64) float64 { return float64(ticks) / hz / secs }
	d := b.total.sub(a.total)
	m := map[string]float64{
		results.CPUCoresUser:    cores(d.user + d.nice),
		results.CPUCoresSystem:  cores(d.system),
		results.CPUCoresIRQ:     cores(d.irq),
		results.CPUCoresSoftirq: cores(d.softirq),
		results.CPUCoresBusy:    cores(d.busy()),
	}
	for _, cpu := range b.order {
		pa, ok := a.perCPU[cpu]
		if !ok {
			continue
		}
		dc := b.perCPU[cpu].sub(pa)
		m[results.For(results.CPUCoresUser, cpu)] = cores(dc.user + dc.nice)
		m[results.For(results.CPUCoresSystem, cpu)] = cores(dc.system)
		m[results.For(results.CPUCoresIRQ, cpu)] = cores(dc.irq)
		m[results.For(results.CPUCoresSoftirq, cpu)] = cores(dc.softirq)
		m[results.For(results.CPUCoresBusy, cpu)] = cores(dc.busy())
	}
	return m
}
