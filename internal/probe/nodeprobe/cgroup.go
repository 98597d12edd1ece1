package nodeprobe

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/results"
)

// PodCgroup is where /proc/PID/cgroup places a process in Kubernetes.
type PodCgroup struct {
	// PodUID is the pod's UID, with dashes (as the API shows it).
	PodUID string
	// ContainerID is the container's runtime ID (no scheme), or "" for a
	// process in the pod's own cgroup.
	ContainerID string
}

// ParseCgroup finds the pod cgroup in the content of a /proc/PID/cgroup
// file: cgroup v1 (one "ID:controllers:path" line per hierarchy) or v2
// ("0::path"), with the kubelet's cgroupfs driver
// (".../kubepods/<qos>/pod<uid>/<container-id>", no <qos> for a
// Guaranteed pod) or its systemd driver
// (".../kubepods-<qos>-pod<uid_with_underscores>.slice/<runtime>-<container-id>.scope"),
// under any cgroup root. ok is false for a process in no pod.
func ParseCgroup(b []byte) (pc PodCgroup, ok bool) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if p, found := parseCgroupPath(f[2]); found {
			if p.ContainerID != "" {
				return p, true
			}
			pc, ok = p, true // a container's line may follow
		}
	}
	return pc, ok
}

// parseCgroupPath finds the pod and the container in one cgroup path.
func parseCgroupPath(path string) (PodCgroup, bool) {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		uid, ok := podSegment(seg)
		if !ok {
			continue
		}
		pc := PodCgroup{PodUID: uid}
		if i+1 < len(segs) {
			pc.ContainerID = containerSegment(segs[i+1])
		}
		return pc, true
	}
	return PodCgroup{}, false
}

// podSegment returns the pod UID a cgroup directory name holds:
// "pod<uid>" (cgroupfs) or "[...-]kubepods[-<qos>]-pod<uid_>.slice"
// (systemd).
func podSegment(seg string) (string, bool) {
	if rest, ok := strings.CutSuffix(seg, ".slice"); ok {
		i := strings.LastIndex(rest, "-pod")
		if i < 0 || !strings.Contains(rest[:i], "kubepods") {
			return "", false
		}
		uid := strings.ReplaceAll(rest[i+len("-pod"):], "_", "-")
		return uid, isUID(uid)
	}
	uid, ok := strings.CutPrefix(seg, "pod")
	return uid, ok && isUID(uid)
}

// isUID reports whether s looks like a pod UID: a UUID, or the 32 hex
// digits of a static pod's.
func isUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}

// containerSegment returns the container ID a cgroup directory name under
// the pod's holds: the name itself (cgroupfs) or the last dash-separated
// part of "<runtime>-<id>.scope" (systemd: cri-containerd-, crio-,
// docker-).
func containerSegment(seg string) string {
	if rest, ok := strings.CutSuffix(seg, ".scope"); ok {
		return rest[strings.LastIndexByte(rest, '-')+1:]
	}
	return seg
}

// ContainerID strips the runtime scheme from a container ID as a pod's
// status shows it ("containerd://<id>" → "<id>").
func ContainerID(statusID string) string {
	if _, id, ok := strings.Cut(statusID, "://"); ok {
		return id
	}
	return statusID
}

// settle is how long after a process is first seen a "not in a pod" is
// asked again: a process a container runtime starts (runc init, an exec)
// exists a moment before it joins its container's cgroup.
const settle = time.Second

// cgroupFinder is the probe.Finder of a node: it finds pods' processes by
// their cgroup, reading each process's /proc/PID/cgroup once (a "not in
// a pod" is read again while the process is young).
type cgroupFinder struct {
	proc string
	// containers maps a component's name to its container ID (for a
	// container component).
	containers map[string]string
	// runPods are the UIDs of the run's pods, the components' and the
	// probe's own: their processes are the run's own.
	runPods map[string]bool
	now     func() time.Time

	cache map[int]cgroupEntry
	// byPod and byContainer index the processes the last Refresh found.
	byPod, byContainer map[string][]int
}

// cgroupEntry is what was read of one process's cgroup.
type cgroupEntry struct {
	pc    PodCgroup
	inPod bool
	// final is set when the answer is kept: a pod's process stays in its
	// pod, and an old process outside pods was not on its way into one.
	final     bool
	firstSeen time.Time
}

var _ probe.Finder = (*cgroupFinder)(nil)

func newCgroupFinder(proc string, spec Spec) *cgroupFinder {
	f := &cgroupFinder{proc: proc, containers: map[string]string{}, runPods: map[string]bool{},
		now: time.Now, cache: map[int]cgroupEntry{}}
	for _, c := range spec.Components {
		if c.Container != "" {
			f.containers[c.Name] = ContainerID(c.ContainerID)
		}
		f.runPods[strings.ToLower(c.PodUID)] = true
	}
	for _, u := range spec.RunPods {
		f.runPods[strings.ToLower(u)] = true
	}
	// The probe's own pod (the node probe's) is the run's too.
	if b, err := os.ReadFile(filepath.Join(proc, "self", "cgroup")); err == nil {
		if pc, ok := ParseCgroup(b); ok {
			f.runPods[pc.PodUID] = true
		}
	}
	return f
}

// Refresh implements probe.Finder: it lists the processes and reads the
// cgroup of those not known yet.
func (f *cgroupFinder) Refresh() error {
	d, err := os.Open(f.proc)
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list %s: %w", f.proc, err)
	}
	now := f.now()
	next := make(map[int]cgroupEntry, len(names))
	f.byPod, f.byContainer = map[string][]int{}, map[string][]int{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		e, ok := f.cache[pid]
		if !ok || !e.final {
			if !ok {
				e.firstSeen = now
			}
			b, err := os.ReadFile(filepath.Join(f.proc, n, "cgroup"))
			if err != nil {
				continue // exited since the listing
			}
			e.pc, e.inPod = ParseCgroup(b)
			e.final = e.inPod || now.Sub(e.firstSeen) >= settle
		}
		next[pid] = e
		if e.inPod {
			f.byPod[e.pc.PodUID] = append(f.byPod[e.pc.PodUID], pid)
			if e.pc.ContainerID != "" {
				f.byContainer[e.pc.ContainerID] = append(f.byContainer[e.pc.ContainerID], pid)
			}
		}
	}
	f.cache = next
	return nil
}

// Processes implements probe.Finder.
func (f *cgroupFinder) Processes(c results.Component) ([]int, error) {
	uid := strings.ToLower(c.PodUID)
	if c.Container == "" {
		if pids := f.byPod[uid]; len(pids) > 0 {
			return pids, nil
		}
		return nil, fmt.Errorf("pod %s: no process in its cgroup on this node", c.PodUID)
	}
	id := f.containers[c.Name]
	var pids []int
	for _, pid := range f.byContainer[id] {
		if f.cache[pid].pc.PodUID == uid {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("pod %s container %s (%s): no process in its cgroup on this node", c.PodUID, c.Container, short(id))
	}
	return pids, nil
}

// Own implements probe.Finder: the processes of the run's pods are the
// run's own.
func (f *cgroupFinder) Own(pid int) bool {
	e, ok := f.cache[pid]
	return ok && e.inPod && f.runPods[e.pc.PodUID]
}

func short(id string) string { return id[:min(12, len(id))] }
