package probe

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// pfKthread is PF_KTHREAD, the task flag (field 9 of /proc/PID/stat) of a
// kernel thread.
const pfKthread = 0x00200000

// kthreadd is the PID of the kernel thread every other kernel thread is a
// child of.
const kthreadd = 2

// procKey identifies one process over time: a PID is reused, a PID and its
// start time are not.
type procKey struct {
	pid   int
	start uint64
}

// ProcessCPU is the CPU one process used over the probe's window.
type ProcessCPU struct {
	// PID and Comm (its command name) identify the process; PPID is its
	// parent when last seen.
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Comm string `json:"comm"`
	// Cores is its user+system CPU over the window, in cores.
	Cores float64 `json:"cores"`
}

// machine is what the scan of every process on the machine keeps between
// samples, to tell the run's own CPU from everyone else's.
type machine struct {
	// prev holds what the last scan saw of every process.
	prev map[int]machProc
	// inNetns caches, per process, whether it lives in one of the run's
	// network namespaces (read once per process).
	inNetns map[procKey]bool
	// foreign accumulates the foreign ticks after the first sample, per
	// process and in total.
	foreign map[procKey]*foreignProc
	ticks   uint64
	// scanned is set once a scan read the process list; err is the last
	// scan's failure.
	scanned bool
	err     error
}

// machProc is what one scan saw of one process.
type machProc struct {
	start, ticks, cticks uint64
	ppid                 int
	// foreign is how the scan classed it.
	foreign bool
}

type foreignProc struct {
	comm  string
	ppid  int
	ticks uint64
}

// scan reads every process once and adds, after the first sample, the CPU
// of the foreign ones: user-space processes that are not the run's own.
// A process is the run's own when it is the controller (Spec.Controller)
// or one of its descendants, one of comp (the components' trees as this
// sample found them), or lives in one of Spec.Netns, or is one the
// Spec.Finder calls own, or descends from such a process. Kernel threads
// (PF_KTHREAD, or children of kthreadd) are the kernel working for
// whoever needs it (ksoftirqd, the kworkers that encrypt for a kernel
// tunnel): never foreign. A process first seen after the first sample
// counts in full if it was born after the last one. The CPU of foreign
// processes that exited between two scans, or lived and
// died between them, is found in their reaper's cutime+cstime (see
// below); that of a process whose reaper is the run's, or that nobody
// reaps (a parent that ignores SIGCHLD), is not counted.
func (s *sampler) scan(comp map[int]pidState, up uint64, upErr error) {
	m := &s.machine
	if m.prev == nil {
		m.prev, m.inNetns, m.foreign = map[int]machProc{}, map[procKey]bool{}, map[procKey]*foreignProc{}
	}
	d, err := os.Open(s.spec.Proc)
	if err != nil {
		m.err = err
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		m.err = fmt.Errorf("list %s: %w", s.spec.Proc, err)
		return
	}
	procs := make(map[int]procStat, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, err := s.fs.stat(pid); err == nil {
			procs[pid] = st
		} // else exited since the listing
	}

	own := make(map[int]bool, len(procs))
	var isOwn func(pid int) bool
	isOwn = func(pid int) bool {
		if v, ok := own[pid]; ok {
			return v
		}
		own[pid] = false // a parent loop cannot recurse forever
		st, ok := procs[pid]
		if !ok {
			return false
		}
		_, isComp := comp[pid]
		v := pid == s.spec.Controller || isComp || s.inRunNetns(pid, st) ||
			(s.spec.Finder != nil && s.spec.Finder.Own(pid)) || (st.ppid > 0 && isOwn(st.ppid))
		own[pid] = v
		return v
	}

	next := make(map[int]machProc, len(procs))
	alive := make(map[procKey]bool, len(procs))
	for pid, st := range procs {
		kernel := st.flags&pfKthread != 0 || pid == kthreadd || st.ppid == kthreadd
		next[pid] = machProc{start: st.start, ticks: st.ticks, cticks: st.cticks, ppid: st.ppid, foreign: !kernel && !isOwn(pid)}
		alive[procKey{pid, st.start}] = true
	}
	// A process that exited since the last scan took the CPU it used
	// after it to its reaper's cutime+cstime, with what was already
	// counted: that much of the reaper's growth is not new. The reaper is
	// taken to be its nearest ancestor, as last seen, that is still alive
	// (a parent that exited too was reaped by its own parent in turn).
	seenBefore := make(map[int]uint64)
	for pid, p := range m.prev {
		if n, ok := next[pid]; ok && n.start == p.start {
			continue
		}
		r := p.ppid
		for hops := 0; hops < 64; hops++ {
			rp, ok := m.prev[r]
			if n, alive := next[r]; !ok || (alive && n.start == rp.start) {
				break
			}
			r = rp.ppid
		}
		seenBefore[r] += p.ticks + p.cticks
	}
	for pid, cur := range next {
		if !cur.foreign {
			continue
		}
		var delta uint64
		if prev, ok := m.prev[pid]; ok && prev.start == cur.start {
			if cur.ticks > prev.ticks {
				delta = cur.ticks - prev.ticks
			}
			// Children reaped since: new CPU only beyond what was seen.
			if reaped := cur.cticks - min(cur.cticks, prev.cticks); reaped > seenBefore[pid] {
				delta += reaped - seenBefore[pid]
			}
		} else if s.n > 0 && m.scanned && upErr == nil && cur.start >= s.lastUp {
			delta = cur.ticks + cur.cticks
		}
		if delta == 0 {
			continue
		}
		m.ticks += delta
		key := procKey{pid, cur.start}
		fp := m.foreign[key]
		if fp == nil {
			fp = &foreignProc{comm: procs[pid].comm}
			m.foreign[key] = fp
		}
		fp.ppid = cur.ppid
		fp.ticks += delta
	}
	for k := range m.inNetns {
		if !alive[k] {
			delete(m.inNetns, k)
		}
	}
	m.prev = next
	m.scanned = true
	m.err = nil
}

// inRunNetns reports whether process pid lives in one of Spec.Netns,
// reading its namespace once per process.
func (s *sampler) inRunNetns(pid int, st procStat) bool {
	if len(s.spec.Netns) == 0 {
		return false
	}
	key := procKey{pid, st.start}
	if v, ok := s.machine.inNetns[key]; ok {
		return v
	}
	ino, err := netnsInode(s.spec.Proc, pid)
	v := err == nil && slices.Contains(s.spec.Netns, ino)
	s.machine.inNetns[key] = v
	return v
}

// netnsInode returns the inode of the network namespace of process pid,
// from its /proc/PID/ns/net link ("net:[4026531840]").
func netnsInode(proc string, pid int) (uint64, error) {
	l, err := os.Readlink(filepath.Join(proc, strconv.Itoa(pid), "ns", "net"))
	if err != nil {
		return 0, err
	}
	return parseNetnsLink(l)
}

// parseNetnsLink parses the target of a /proc/PID/ns/net link.
func parseNetnsLink(l string) (uint64, error) {
	b := []byte(l)
	i, j := bytes.IndexByte(b, '['), bytes.LastIndexByte(b, ']')
	if !bytes.HasPrefix(b, []byte("net:")) || i < 0 || j <= i {
		return 0, fmt.Errorf("netns link %q: want net:[INODE]", l)
	}
	return strconv.ParseUint(l[i+1:j], 10, 64)
}

// foreignProcesses lists the foreign processes that used CPU after the
// first sample, most CPU first, over secs seconds.
func (m *machine) foreignProcesses(hz, secs float64) []ProcessCPU {
	out := make([]ProcessCPU, 0, len(m.foreign))
	for k, fp := range m.foreign {
		out = append(out, ProcessCPU{PID: k.pid, PPID: fp.ppid, Comm: fp.comm, Cores: float64(fp.ticks) / hz / secs})
	}
	slices.SortFunc(out, func(a, b ProcessCPU) int {
		if a.Cores != b.Cores {
			if a.Cores > b.Cores {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	return out
}
