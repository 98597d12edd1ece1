package testbed

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// LedgerDir holds one ledger file per live or crashed run.
var LedgerDir = "/run/spanperf"

// Entry kinds of a ledger.
const (
	KindNetns  = "netns"  // a named network namespace (Name)
	KindPID    = "pid"    // a process (PID, Start = its start time in clock ticks)
	KindCgroup = "cgroup" // a cgroup directory (Path)
	KindPath   = "path"   // a file or directory to remove (Path)
	KindMount  = "mount"  // a mount point to unmount (Path)
	// KindKubePatch is a change to a workload object in a cluster (Kube):
	// the CPU limit of one of its containers, set for sizing. It is undone
	// by restoring Kube.Original (`spanperf clean --kube`), not locally.
	KindKubePatch = "kube-patch"
)

// Entry is one thing a run created.
type Entry struct {
	Kind  string `json:"kind"`
	Name  string `json:"name,omitempty"`
	Path  string `json:"path,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
	// Owner, on the first line only, is the PID of the controller; 0 for a
	// testbed left up on purpose by `spanperf up`.
	Owner      int    `json:"owner,omitempty"`
	OwnerStart uint64 `json:"owner_start,omitempty"`
	Run        string `json:"run,omitempty"`
	// Kube is what a KindKubePatch entry changed, and how to undo it.
	Kube *KubePatch `json:"kube,omitempty"`
}

// KubePatch records a container's resources as they were before a run
// patched them, written before the patch is sent, so that a killed run's
// change can be undone from another process.
type KubePatch struct {
	// Kubeconfig is the kubeconfig file the run connected with; "" is the
	// default loading rules.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context (the cluster).
	Context string `json:"context"`
	// Kind is Deployment, DaemonSet or StatefulSet (apps/v1).
	Kind string `json:"object_kind"`
	// Namespace and Name name the object.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Container is the container whose resources were patched.
	Container string `json:"container"`
	// Original is the container's resources (core/v1
	// ResourceRequirements as JSON) before the patch.
	Original json.RawMessage `json:"original"`
}

// Ledger is an append-only file of Entries, synced as each is added, so that
// what a SIGKILLed run created can still be found and removed.
type Ledger struct {
	mu   sync.Mutex
	path string
	f    *os.File
	run  string
}

// NewLedger creates the ledger of run, owned by this process unless detached.
func NewLedger(run string, detached bool) (*Ledger, error) {
	if err := os.MkdirAll(LedgerDir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	p := filepath.Join(LedgerDir, run+".ledger")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l := &Ledger{path: p, f: f, run: run}
	head := Entry{Kind: "run", Run: run}
	if !detached {
		head.Owner = os.Getpid()
		head.OwnerStart, _ = ProcStart(head.Owner)
	}
	if err := l.Add(head); err != nil {
		f.Close()
		os.Remove(p)
		return nil, err
	}
	return l, nil
}

// Run is the run ID the ledger belongs to.
func (l *Ledger) Run() string { return l.run }

// Add appends e and syncs the file.
func (l *Ledger) Add(e Entry) error {
	if l == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("ledger closed")
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return l.f.Sync()
}

// AddPID records a process, with its start time so a reused PID is not killed.
func (l *Ledger) AddPID(pid int) error {
	st, _ := ProcStart(pid)
	return l.Add(Entry{Kind: KindPID, PID: pid, Start: st})
}

// MkdirTemp makes a directory spanperf-RUN-KIND-* in the system's temp dir
// (mode 0700) and records it, so that `spanperf clean` removes it after a
// crash, by the ledger or by its name. kind is [a-z0-9-]. The caller
// removes it when done. A nil ledger makes an unrecorded spanperf-KIND-*.
func (l *Ledger) MkdirTemp(kind string) (string, error) {
	prefix := "spanperf-" + kind + "-"
	if l != nil {
		prefix = "spanperf-" + l.run + "-" + kind + "-"
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := l.Add(Entry{Kind: KindPath, Path: dir}); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// Remove deletes the ledger file: everything in it has been undone.
func (l *Ledger) Remove() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	err := os.Remove(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Path is the ledger's file.
func (l *Ledger) Path() string { return l.path }

// RewriteLedger replaces the ledger file at path with ents, atomically (a
// new file renamed over it). It is for sweeping a dead run's ledger, whose
// owner no longer appends to it: what has been undone is dropped, what
// remains stays recorded.
func RewriteLedger(path string, ents []Entry) error {
	var b []byte
	for _, e := range ents {
		j, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("rewrite ledger %s: %w", path, err)
		}
		b = append(append(b, j...), '\n')
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("rewrite ledger %s: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewrite ledger %s: %w", path, err)
	}
	return nil
}

// ReadLedger reads a ledger file. A torn last line (a crash mid-write) is ignored.
func ReadLedger(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// ProcStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which tells a PID apart from a reused one.
func ProcStart(pid int) (uint64, error) {
	_, start, err := procState(pid)
	return start, err
}

// procState returns a process's state letter (field 3 of /proc/PID/stat:
// R, S, D, Z, ...) and its start time.
func procState(pid int) (byte, uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("proc %d: bad stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("proc %d: short stat", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// Alive reports whether pid is running and is the process that started at start
// (start 0 skips that check). A zombie, dead but not yet reaped by its
// parent (an orphan waits for PID 1, which may reap late), is not alive.
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	state, st, err := procState(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	return start == 0 || st == start
}
