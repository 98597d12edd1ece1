package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/testbed"
)

// CgroupRoot is where cgroup hierarchies are mounted.
var CgroupRoot = "/sys/fs/cgroup"

// CleanOptions chooses what Clean removes.
type CleanOptions struct {
	// Detached also removes testbeds left up on purpose by `spanperf up`.
	Detached bool
	// Run, when set, limits the sweep to that run ID.
	Run string
}

// CleanReport says what Clean found and removed.
type CleanReport struct {
	Removed []string // what was removed, one line each
	Skipped []string // what was left, and why
}

// Clean removes what runs that are no longer alive left behind: first what
// their ledgers list, then anything carrying spanperf's names (namespaces,
// processes inside them, cgroups, temp dirs) that no live run owns.
func Clean(opts CleanOptions) (CleanReport, error) {
	var rep CleanReport
	var errs []error
	live := map[string]bool{}
	ledgers, _ := filepath.Glob(filepath.Join(testbed.LedgerDir, "*.ledger"))
	for _, lp := range ledgers {
		run := strings.TrimSuffix(filepath.Base(lp), ".ledger")
		ents, err := testbed.ReadLedger(lp)
		if err != nil || len(ents) == 0 {
			continue
		}
		head := ents[0]
		if opts.Run != "" && run != opts.Run {
			live[run] = true
			continue
		}
		if head.Owner != 0 && testbed.Alive(head.Owner, head.OwnerStart) {
			live[run] = true
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: still running (pid %d)", run, head.Owner))
			continue
		}
		if head.Owner == 0 && !opts.Detached {
			live[run] = true
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: left up by `spanperf up`; `spanperf down` removes it", run))
			continue
		}
		if err := undo(ents, &rep); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", run, err))
			continue
		}
		// Changes in clusters are not undone here (that needs the cluster's
		// API and credentials): the ledger is kept with only them, for
		// `spanperf clean --kube`, which removes it once they are restored.
		if kept := kubePatches(ents); len(kept) > 0 {
			if err := testbed.RewriteLedger(lp, append([]testbed.Entry{head}, kept...)); err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", run, err))
				continue
			}
			for _, e := range kept {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("run %s: %s in context %s is still patched; `spanperf clean --kube` restores it", run, kubeObject(e), e.Kube.Context))
			}
			continue
		}
		os.Remove(lp)
		rep.Removed = append(rep.Removed, "ledger "+lp)
	}
	// owned reports whether a spanperf-named item belongs to a run that must
	// be left alone. The ledger is read again at the moment of the sweep: a
	// run that started after the loop above has a ledger by the time any of
	// its items exist, and must not be mistaken for an abandoned one.
	owned := func(name string) bool {
		run := RunOf(name)
		if run == "" {
			return true // not named by spanperf
		}
		if opts.Run != "" && run != opts.Run {
			return true
		}
		if live[run] {
			return true
		}
		if ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, run+".ledger")); err == nil && len(ents) > 0 {
			head := ents[0]
			if (head.Owner != 0 && testbed.Alive(head.Owner, head.OwnerStart)) || (head.Owner == 0 && !opts.Detached) {
				live[run] = true
				return true
			}
		}
		return false
	}
	for _, ns := range ListNamed() {
		if owned(ns) {
			continue
		}
		killInNetns(ns, &rep)
		if err := DeleteNamed(ns); err != nil {
			errs = append(errs, fmt.Errorf("delete netns %s: %w", ns, err))
		} else {
			rep.Removed = append(rep.Removed, "netns "+ns)
		}
	}
	for _, cg := range findCgroups() {
		if owned(filepath.Base(cg)) {
			continue
		}
		if err := removeCgroup(cg); err != nil {
			errs = append(errs, err)
		} else {
			rep.Removed = append(rep.Removed, "cgroup "+cg)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), Prefix+"*"))
	for _, d := range tmps {
		if owned(filepath.Base(d)) {
			continue
		}
		unmountUnder(d)
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		} else {
			rep.Removed = append(rep.Removed, "dir "+d)
		}
	}
	return rep, errors.Join(errs...)
}

// kubePatches returns the ledger's changes to cluster objects.
func kubePatches(ents []testbed.Entry) []testbed.Entry {
	var out []testbed.Entry
	for _, e := range ents {
		if e.Kind == testbed.KindKubePatch && e.Kube != nil {
			out = append(out, e)
		}
	}
	return out
}

// kubeObject names a kube-patch entry's object: "deployment ns/name container c".
func kubeObject(e testbed.Entry) string {
	return fmt.Sprintf("%s %s/%s container %s", strings.ToLower(e.Kube.Kind), e.Kube.Namespace, e.Kube.Name, e.Kube.Container)
}

// undo reverses a ledger (kube-patch entries excepted, see Clean): processes first, then mounts, cgroups, namespaces, paths.
func undo(ents []testbed.Entry, rep *CleanReport) error {
	var errs []error
	for _, e := range ents {
		if e.Kind == testbed.KindPID && testbed.Alive(e.PID, e.Start) {
			syscall.Kill(-e.PID, syscall.SIGKILL)
			syscall.Kill(e.PID, syscall.SIGKILL)
			waitGone(e.PID, e.Start)
			rep.Removed = append(rep.Removed, "process "+strconv.Itoa(e.PID))
		}
	}
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		switch e.Kind {
		case testbed.KindMount:
			if unix.Unmount(e.Path, unix.MNT_DETACH) == nil {
				rep.Removed = append(rep.Removed, "mount "+e.Path)
			}
		case testbed.KindCgroup:
			if _, err := os.Stat(e.Path); err == nil {
				if err := removeCgroup(e.Path); err != nil {
					errs = append(errs, err)
				} else {
					rep.Removed = append(rep.Removed, "cgroup "+e.Path)
				}
			}
		case testbed.KindNetns:
			if _, err := os.Stat(filepath.Join(NetnsDir, e.Name)); err == nil {
				killInNetns(e.Name, rep)
				if err := DeleteNamed(e.Name); err != nil {
					errs = append(errs, err)
				} else {
					rep.Removed = append(rep.Removed, "netns "+e.Name)
				}
			}
		case testbed.KindPath:
			if _, err := os.Lstat(e.Path); err == nil {
				unmountUnder(e.Path)
				if err := os.RemoveAll(e.Path); err != nil {
					errs = append(errs, err)
				} else {
					rep.Removed = append(rep.Removed, "path "+e.Path)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func waitGone(pid int, start uint64) {
	for i := 0; i < 100 && testbed.Alive(pid, start); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// killInNetns kills every process whose network namespace is the named one.
func killInNetns(name string, rep *CleanReport) {
	var st unix.Stat_t
	if unix.Stat(filepath.Join(NetnsDir, name), &st) != nil {
		return
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var ps unix.Stat_t
		if unix.Stat("/proc/"+p.Name()+"/ns/net", &ps) != nil {
			continue
		}
		if ps.Ino == st.Ino && ps.Dev == st.Dev {
			start, _ := testbed.ProcStart(pid)
			syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, start)
			rep.Removed = append(rep.Removed, fmt.Sprintf("process %d in %s", pid, name))
		}
	}
}

// findCgroups lists spanperf's top-level cgroups in every v1 hierarchy and v2.
func findCgroups() []string {
	var out []string
	for _, pat := range []string{filepath.Join(CgroupRoot, "*", Prefix+"*"), filepath.Join(CgroupRoot, Prefix+"*")} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out = append(out, d)
			}
		}
	}
	return out
}

// removeCgroup kills what is left in a cgroup tree and removes it, leaves first.
func removeCgroup(dir string) error {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if b, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		var err error
		for try := 0; try < 50; try++ {
			if err = os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return nil
}

// unmountUnder detaches any mount at or below dir (a daemon's private /run).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			mps = append(mps, f[1])
		}
	}
	for i := len(mps) - 1; i >= 0; i-- {
		unix.Unmount(mps[i], unix.MNT_DETACH)
	}
}
