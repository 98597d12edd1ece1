package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
)

// cpuTimes are the USER_HZ tick counters of one "cpu" line of /proc/stat.
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

// ticked is the busy time the kernel's tick sampled: user, nice, system,
// irq and softirq (guest time is already inside user and nice).
func (c cpuTimes) ticked() uint64 { return c.user + c.nice + c.system + c.irq + c.softirq }

// notBusy is the time the CPU did no work of this machine's: idle and
// iowait, which a tickless kernel measures exactly at each idle entry and
// exit, and steal (a hypervisor ran someone else).
func (c cpuTimes) notBusy() uint64 { return c.idle + c.iowait + c.steal }

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
	// at is when it was read (set by the sampler).
	at time.Time
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
// machine-wide cores, mpstat's view of the window: results.CPUCoresUser
// (user+nice), CPUCoresSystem, CPUCoresIRQ, CPUCoresSoftirq, CPUCoresBusy,
// and the same five per CPU present in both reads, named
// For(CPUCoresUser, "cpuN"), ...
//
// User, system, irq and softirq are sampled at the kernel's tick, which
// misjudges work done in bursts shorter than a tick (a request-response
// ping-pong) by tens of percent either way. Busy is therefore each CPU's
// elapsed time less its idle, iowait and steal time, which a tickless
// kernel measures at every idle entry and exit: secs × CPUs − not busy.
// Without per-CPU lines it is the sum of the sampled fields.
func kernelMetrics(a, b cpuStat, hz, secs float64) map[string]float64 {
	cores := func(ticks float64) float64 { return ticks / hz / secs }
	busy := func(a, b cpuTimes) float64 {
		if b.idle < a.idle || b.iowait < a.iowait || b.steal < a.steal {
			return float64(b.sub(a).ticked()) // a CPU taken offline and back
		}
		return max(secs*hz-float64(b.sub(a).notBusy()), 0)
	}
	d := b.total.sub(a.total)
	m := map[string]float64{
		results.CPUCoresUser:    cores(float64(d.user + d.nice)),
		results.CPUCoresSystem:  cores(float64(d.system)),
		results.CPUCoresIRQ:     cores(float64(d.irq)),
		results.CPUCoresSoftirq: cores(float64(d.softirq)),
		results.CPUCoresBusy:    cores(float64(d.ticked())),
	}
	total, cpus := 0.0, 0
	for _, cpu := range b.order {
		pa, ok := a.perCPU[cpu]
		if !ok {
			continue
		}
		dc := b.perCPU[cpu].sub(pa)
		m[results.For(results.CPUCoresUser, cpu)] = cores(float64(dc.user + dc.nice))
		m[results.For(results.CPUCoresSystem, cpu)] = cores(float64(dc.system))
		m[results.For(results.CPUCoresIRQ, cpu)] = cores(float64(dc.irq))
		m[results.For(results.CPUCoresSoftirq, cpu)] = cores(float64(dc.softirq))
		bc := busy(pa, b.perCPU[cpu])
		m[results.For(results.CPUCoresBusy, cpu)] = cores(bc)
		total += bc
		cpus++
	}
	if cpus > 0 {
		m[results.CPUCoresBusy] = cores(total)
	}
	return m
}
