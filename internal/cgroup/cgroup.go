// Package cgroup puts processes in a CPU cgroup of their own, limits the
// group's CPU with a CFS quota and reads the CPU time it used.
//
// It works on cgroup v1, where the cpu and cpuacct controllers are mounted
// as separate hierarchies (/sys/fs/cgroup/cpu and /sys/fs/cgroup/cpuacct) or
// as one (/sys/fs/cgroup/cpu,cpuacct), and on cgroup v2 when /sys/fs/cgroup
// is the unified hierarchy and offers the cpu controller. Where both exist
// (a hybrid system), v1 is used: the v2 hierarchy then holds no CPU
// controller.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Spec describes a cgroup to create.
type Spec struct {
	// Path is the group's path below the root of each hierarchy, e.g.
	// "spanperf-1a2b3c/wireguard-go@a". It is relative, clean and has no
	// "..". spanperf's groups start with "spanperf-<run id>" so that
	// `spanperf clean` recognises them.
	Path string
	// Ledger, when not nil, records every directory New creates before it
	// is used, so `spanperf clean` can remove it after a crash.
	Ledger *testbed.Ledger
}

// Validate reports a Spec New cannot create.
func (s Spec) Validate() error {
	switch {
	case s.Path == "":
		return errors.New("cgroup: empty path")
	case filepath.IsAbs(s.Path):
		return fmt.Errorf("cgroup %s: path must be relative", s.Path)
	case filepath.Clean(s.Path) != s.Path || s.Path == "." || slices.Contains(strings.Split(s.Path, "/"), ".."):
		return fmt.Errorf("cgroup %s: path must be clean and stay below the root", s.Path)
	}
	return nil
}

// Cgroup is a live group in every hierarchy of the layout. Its methods are
// safe for concurrent use.
type Cgroup struct {
	path   string
	layout layout
	// dirs are the group's directories, one per hierarchy of layout.
	dirs []string
	// owned lists the directories this group holds a reference to (see
	// refs), parents before children.
	owned []string

	mu     sync.Mutex
	closed bool
}

var (
	// treeMu guards refs and serialises making and removing directories,
	// so that a Close removing a shared parent ("spanperf-<run>") does not
	// race a New making a sibling below it.
	treeMu sync.Mutex
	// refs counts, for each directory this process created, the live
	// groups at or below it. A directory is removed when its count drops to
	// zero; one that existed before (not in refs) is never removed.
	refs = map[string]int{}
)

// New creates the group of spec in every hierarchy this machine accounts
// and limits CPU with, and its missing parents; on v2 it also enables the
// cpu controller for the new groups. A group that exists already is an
// error. A machine without such a hierarchy gives an error wrapping
// ErrNotSupported. On error nothing is left behind.
func New(spec Spec) (*Cgroup, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l, err := detect()
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", spec.Path, err)
	}
	return newIn(spec, l)
}

// newIn is New in the hierarchies of l, for a valid spec.
func newIn(spec Spec, l layout) (_ *Cgroup, err error) {
	treeMu.Lock()
	defer treeMu.Unlock()
	c := &Cgroup{path: spec.Path, layout: l}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	parts := strings.Split(spec.Path, "/")
	for _, h := range l {
		dir := h.mount
		for i, part := range parts {
			parent := dir
			dir = filepath.Join(dir, part)
			if h.v2 {
				// A v2 group gets the cpu controller (cpu.max) only when its
				// parent delegates it.
				if err := enableCPU(parent); err != nil {
					return nil, fmt.Errorf("cgroup %s: %w", spec.Path, err)
				}
			}
			leaf := i == len(parts)-1
			if !leaf && refs[dir] > 0 {
				refs[dir]++
				c.owned = append(c.owned, dir)
				continue
			}
			if _, err := os.Stat(dir); err == nil {
				if leaf {
					return nil, fmt.Errorf("cgroup %s: %s exists already", spec.Path, dir)
				}
				continue // a parent made by someone else: used, never removed
			}
			// In the ledger before it exists: a crash right after mkdir
			// must not leave it unlisted.
			if err := spec.Ledger.Add(testbed.Entry{Kind: testbed.KindCgroup, Path: dir}); err != nil {
				return nil, fmt.Errorf("cgroup %s: %w", spec.Path, err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, fmt.Errorf("cgroup %s: %w", spec.Path, err)
			}
			refs[dir] = 1
			c.owned = append(c.owned, dir)
		}
		c.dirs = append(c.dirs, dir)
	}
	return c, nil
}

// enableCPU delegates the cpu controller to the children of the v2 group
// dir, when dir offers it and does not delegate it yet.
func enableCPU(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(string(b)), "cpu") {
		return nil
	}
	b, err = os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(b)), "cpu") {
		return nil // usage still reads from cpu.stat; SetCPULimit says why it cannot
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
		return fmt.Errorf("enable cpu controller in %s: %w", dir, err)
	}
	return nil
}

// Path returns the group's path below each hierarchy's root (Spec.Path).
func (c *Cgroup) Path() string { return c.path }

// Dirs returns the group's directory in each hierarchy it lives in.
func (c *Cgroup) Dirs() []string { return slices.Clone(c.dirs) }

// Add moves process pid, with all its threads, into the group in every
// hierarchy. Children it forks later start in the group; children it has
// already are left where they are (AddTree moves them too).
func (c *Cgroup) Add(pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cgroup %s: closed", c.path)
	}
	for _, d := range c.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup %s: add %d: %w", c.path, pid, err)
		}
	}
	return nil
}

// AddTree moves process pid and every living descendant of it into the
// group (see Add). A descendant that exits meanwhile is skipped.
func (c *Cgroup) AddTree(pid int) error {
	if err := c.Add(pid); err != nil {
		return err
	}
	for _, d := range Descendants(pid) {
		if err := c.Add(d); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// SetCPULimit limits the group to cores CPUs with a CFS bandwidth quota of
// cores × the group's period (cpu.cfs_quota_us, or cpu.max on v2) in every
// period; cores 0 removes the limit. A limit below the kernel's least quota
// (1 ms per period: 0.01 cores at the usual 100 ms period) is an error.
func (c *Cgroup) SetCPULimit(cores float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cgroup %s: closed", c.path)
	}
	if cores < 0 || math.IsNaN(cores) || math.IsInf(cores, 0) {
		return fmt.Errorf("cgroup %s: cpu limit %v: must be ≥ 0", c.path, cores)
	}
	h, dir := c.dir(func(h hierarchy) bool { return h.cpu })
	if h.v2 {
		return c.setCPUMax(dir, cores)
	}
	period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	quota := int64(-1)
	if cores > 0 {
		if quota, err = quotaFor(cores, period); err != nil {
			return fmt.Errorf("cgroup %s: %w", c.path, err)
		}
	}
	if err := writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)); err != nil {
		return fmt.Errorf("cgroup %s: set cpu limit %v: %w", c.path, cores, err)
	}
	return nil
}

func (c *Cgroup) setCPUMax(dir string, cores float64) error {
	p := filepath.Join(dir, "cpu.max")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cgroup %s: %w: the cpu controller is not enabled for this group", c.path, ErrNotSupported)
	} else if err != nil {
		return fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	period := int64(100000)
	if f := strings.Fields(string(b)); len(f) == 2 {
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			period = n
		}
	}
	val := "max"
	if cores > 0 {
		quota, err := quotaFor(cores, period)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", c.path, err)
		}
		val = strconv.FormatInt(quota, 10)
	}
	if err := writeFile(p, val+" "+strconv.FormatInt(period, 10)); err != nil {
		return fmt.Errorf("cgroup %s: set cpu limit %v: %w", c.path, cores, err)
	}
	return nil
}

// minQuota is the least CFS quota the kernel accepts, in µs.
const minQuota = 1000

// quotaFor is the quota in µs that gives cores CPUs at period µs.
func quotaFor(cores float64, period int64) (int64, error) {
	q := math.Round(cores * float64(period))
	if q < minQuota {
		return 0, fmt.Errorf("cpu limit %v: below the kernel's least quota, %d µs per %d µs period (%.3g cores)",
			cores, minQuota, period, float64(minQuota)/float64(period))
	}
	return int64(q), nil
}

// CPULimit returns the group's CPU limit in cores, 0 when unlimited.
func (c *Cgroup) CPULimit() (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, dir := c.dir(func(h hierarchy) bool { return h.cpu })
	if h.v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return 0, fmt.Errorf("cgroup %s: cpu.max %q: want QUOTA PERIOD", c.path, strings.TrimSpace(string(b)))
		}
		if f[0] == "max" {
			return 0, nil
		}
		q, err1 := strconv.ParseInt(f[0], 10, 64)
		p, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || p <= 0 {
			return 0, fmt.Errorf("cgroup %s: cpu.max %q: want QUOTA PERIOD", c.path, strings.TrimSpace(string(b)))
		}
		return float64(q) / float64(p), nil
	}
	q, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	p, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	if q < 0 || p <= 0 {
		return 0, nil
	}
	return float64(q) / float64(p), nil
}

// Usage returns the CPU time charged to the group since it was created
// (cpuacct.usage on v1, usage_usec of cpu.stat on v2): a counter, so the CPU
// used over an interval is the difference of two readings.
func (c *Cgroup) Usage() (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("cgroup %s: closed", c.path)
	}
	h, dir := c.dir(func(h hierarchy) bool { return h.cpuacct })
	if !h.v2 {
		ns, err := readInt(filepath.Join(dir, "cpuacct.usage"))
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
		}
		return time.Duration(ns), nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroup %s: cpu.stat: %w", c.path, err)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	return 0, fmt.Errorf("cgroup %s: cpu.stat has no usage_usec", c.path)
}

// Procs lists the processes in the group (the first hierarchy's
// cgroup.procs).
func (c *Cgroup) Procs() ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil
	}
	return readPIDs(filepath.Join(c.dirs[0], "cgroup.procs"))
}

// Close moves the processes still in the group to the root of each
// hierarchy (where the group's tree hangs, without a CPU limit) and removes
// the group's directories, and every parent New created that no other group
// uses any more, leaves first. Close is safe to call twice; the second call
// does nothing.
func (c *Cgroup) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	treeMu.Lock()
	defer treeMu.Unlock()
	var errs []error
	for i, h := range c.layout {
		if i < len(c.dirs) {
			if err := drain(c.dirs[i], h.mount); err != nil {
				errs = append(errs, fmt.Errorf("cgroup %s: %w", c.path, err))
			}
		}
	}
	if err := c.release(); err != nil {
		errs = append(errs, fmt.Errorf("cgroup %s: %w", c.path, err))
	}
	return errors.Join(errs...)
}

// release drops the group's references to its directories, children
// first, and removes those no group uses any more. treeMu must be held.
func (c *Cgroup) release() error {
	var errs []error
	for i := len(c.owned) - 1; i >= 0; i-- {
		d := c.owned[i]
		if refs[d]--; refs[d] > 0 {
			continue
		}
		delete(refs, d)
		if err := rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	c.owned = nil
	return errors.Join(errs...)
}

// dir returns the first hierarchy for which want holds, and the group's
// directory in it.
func (c *Cgroup) dir(want func(hierarchy) bool) (hierarchy, string) {
	for i, h := range c.layout {
		if want(h) {
			return h, c.dirs[i]
		}
	}
	return c.layout[0], c.dirs[0]
}

// drain moves every process of group dir to root. The CPU limit belongs
// to the group, so the processes leave it behind.
func drain(dir, root string) error {
	var last error
	for try := 0; try < 50; try++ {
		pids, err := readPIDs(filepath.Join(dir, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if err := writeFile(filepath.Join(root, "cgroup.procs"), strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
				last = fmt.Errorf("move %d out of %s: %w", pid, dir, err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last == nil {
		last = fmt.Errorf("%s: processes keep arriving", dir)
	}
	return last
}

// rmdir removes an empty cgroup directory, waiting a little while exiting
// processes (zombies not yet reaped) keep it busy.
func rmdir(dir string) error {
	var err error
	for try := 0; try < 100; try++ {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !isBusy(err) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

func isBusy(err error) bool {
	return errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY)
}

// writeFile writes one value to a cgroup control file, without creating it
// or truncating it (control files take one write each).
func writeFile(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

func readPIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// Descendants returns the living descendants of process pid (children,
// their children, ...), read from /proc.
func Descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command (which may hold spaces and
		// parentheses) are: state, ppid, ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, ch := range children[p] {
			out = append(out, ch)
			queue = append(queue, ch)
		}
	}
	return out
}
