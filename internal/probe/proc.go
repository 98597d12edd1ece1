package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procStat is what one read of /proc/PID/stat gives.
type procStat struct {
	// comm is the command name (field 2, without its parentheses).
	comm string
	ppid int
	// flags are the kernel's task flags (field 9): pfKthread marks a
	// kernel thread.
	flags uint64
	// ticks is utime+stime in USER_HZ ticks, every thread included.
	ticks uint64
	// cticks is cutime+cstime: the CPU of the children it has waited for
	// (and theirs), added when each was reaped.
	cticks uint64
	// start is the start time in USER_HZ ticks after boot.
	start uint64
	// rssPages is the resident set in pages (as statm's resident field).
	rssPages uint64
}

// parseProcStat parses the content of /proc/PID/stat. The command name
// (field 2) may hold spaces and parentheses, so fields are counted from
// its last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	// f[0] is field 3 (state).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want ≥ 22", len(f))
	}
	num := func(field int) uint64 {
		v, err := strconv.ParseUint(f[field-3], 10, 64)
		if err != nil {
			// rss may be negative transiently on old kernels; treat as 0.
			return 0
		}
		return v
	}
	ppid, err := strconv.Atoi(f[4-3])
	if err != nil {
		return procStat{}, fmt.Errorf("ppid %q: %w", f[1], err)
	}
	comm := ""
	if j := bytes.IndexByte(b, '('); j >= 0 && j < i {
		comm = string(b[j+1 : i])
	}
	return procStat{comm: comm, ppid: ppid, flags: num(9), ticks: num(14) + num(15), cticks: num(16) + num(17), start: num(22), rssPages: num(24)}, nil
}

// procfs reads processes under a /proc root.
type procfs struct {
	root string
	// noChildren is set once /proc/PID/task/TID/children turned out to be
	// absent (a kernel without CONFIG_PROC_CHILDREN): descendants are then
	// found by scanning every process's parent.
	noChildren bool
	buf        []byte
}

// stat reads /proc/PID/stat, with bare system calls into a reused buffer:
// a sample reads it for every process on the machine.
func (p *procfs) stat(pid int) (procStat, error) {
	b, err := p.readSmall(filepath.Join(p.root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("parse %s/%d/stat: %w", p.root, pid, err)
	}
	return st, nil
}

// readSmall reads a file of at most a few KiB (a /proc/PID/stat line) into
// p.buf; the result is valid until the next call.
func (p *procfs) readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if p.buf == nil {
		p.buf = make([]byte, 4096)
	}
	n := 0
	for {
		m, err := unix.Read(fd, p.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return p.buf[:n], nil
		}
		n += m
		if n == len(p.buf) {
			p.buf = append(p.buf, make([]byte, len(p.buf))...)
		}
	}
}

// tree returns root and every descendant of it, root first, or nil when
// root does not exist.
func (p *procfs) tree(root int) []int {
	if _, err := os.Stat(filepath.Join(p.root, strconv.Itoa(root))); err != nil {
		return nil
	}
	if !p.noChildren {
		pids, ok := p.treeByChildren(root)
		if ok {
			return pids
		}
		p.noChildren = true
	}
	return p.treeByScan(root)
}

// treeByChildren walks the children files of every thread; ok is false
// when the kernel has none.
func (p *procfs) treeByChildren(root int) (pids []int, ok bool) {
	pids = []int{root}
	seen := map[int]bool{root: true}
	for i := 0; i < len(pids); i++ {
		dir := filepath.Join(p.root, strconv.Itoa(pids[i]), "task")
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue // exited meanwhile
		}
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, t.Name(), "children"))
			if errors.Is(err, fs.ErrNotExist) && i == 0 {
				if _, serr := os.Stat(filepath.Join(dir, t.Name())); serr == nil {
					return nil, false
				}
			}
			if err != nil {
				continue
			}
			for _, s := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(s); err == nil && !seen[c] {
					seen[c] = true
					pids = append(pids, c)
				}
			}
		}
	}
	return pids, true
}

// treeByScan reads the parent of every process.
func (p *procfs) treeByScan(root int) []int {
	ents, err := os.ReadDir(p.root)
	if err != nil {
		return []int{root}
	}
	kids := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := p.stat(pid); err == nil {
			kids[st.ppid] = append(kids[st.ppid], pid)
		}
	}
	pids := []int{root}
	seen := map[int]bool{root: true}
	for i := 0; i < len(pids); i++ {
		for _, c := range kids[pids[i]] {
			if !seen[c] {
				seen[c] = true
				pids = append(pids, c)
			}
		}
	}
	return pids
}

// uptimeTicks reads /proc/uptime as USER_HZ ticks after boot.
func (p *procfs) uptimeTicks(hz float64) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(p.root, "uptime"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty /proc/uptime")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/uptime: %w", err)
	}
	return uint64(s * hz), nil
}

// TreeCPUSeconds returns the user+system CPU seconds that process pid and
// its living descendants have used since they started (every thread
// included; descendants that have exited are not counted). Two calls
// bracket a period to measure.
func TreeCPUSeconds(pid int) (float64, error) {
	ticks, err := treeSum(pid, func(st procStat) uint64 { return st.ticks })
	return float64(ticks) / userHZ(), err
}

// treeSum sums field over process pid and its living descendants; an
// error only when pid itself cannot be read.
func treeSum(pid int, field func(procStat) uint64) (uint64, error) {
	fs := procfs{root: "/proc"}
	tree := fs.tree(pid)
	if tree == nil {
		return 0, fmt.Errorf("process %d not found", pid)
	}
	var sum uint64
	for i, p := range tree {
		st, err := fs.stat(p)
		if err != nil {
			if i == 0 {
				return 0, err
			}
			continue
		}
		sum += field(st)
	}
	return sum, nil
}

// TreeRSSBytes returns the resident memory of process pid and its living
// descendants (pages shared between them counted in each).
func TreeRSSBytes(pid int) (float64, error) {
	pages, err := treeSum(pid, func(st procStat) uint64 { return st.rssPages })
	return float64(pages) * float64(os.Getpagesize()), err
}

// atClkTck is the auxiliary vector entry that holds USER_HZ.
const atClkTck = 17

// userHZ returns the clock tick rate /proc counts CPU time in (USER_HZ,
// sysconf(_SC_CLK_TCK)), read from the process's auxiliary vector; 100,
// its value on every common architecture, when that cannot be read.
var userHZ = sync.OnceValue(func() float64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	if hz := auxvValue(b, atClkTck); hz > 0 {
		return float64(hz)
	}
	return 100
})

// auxvValue returns the value of entry typ in an auxiliary vector of
// native words, or 0.
func auxvValue(b []byte, typ uint64) uint64 {
	w := int(unsafe.Sizeof(uintptr(0)))
	word := func(i int) uint64 {
		if w == 4 {
			return uint64(binary.NativeEndian.Uint32(b[i:]))
		}
		return binary.NativeEndian.Uint64(b[i:])
	}
	for i := 0; i+2*w <= len(b); i += 2 * w {
		if word(i) == typ {
			return word(i + w)
		}
	}
	return 0
}
