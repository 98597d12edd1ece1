package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (as by `ip netns`).
const NetnsDir = "/var/run/netns"

// Prefix starts the name of every namespace spanperf creates.
const Prefix = "spanperf-"

// inNS runs fn with the calling OS thread switched into ns. It runs on a
// fresh goroutine locked to its thread; if the thread cannot be switched
// back, the goroutine exits still locked so the runtime discards the thread
// instead of reusing it in the wrong namespace. Processes started by fn
// inherit ns.
func inNS(ns vnetns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave netns: %w", err))
			return // thread stays locked and is destroyed
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

var netnsDirOnce sync.Once

// prepareNetnsDir makes NetnsDir a shared mount of itself, as iproute2's
// `ip netns add` does when it is not a mount point yet. Done first, it keeps
// a later `ip netns add` from stacking that mount over namespaces spanperf
// has already mounted there, which would leave them unreachable by path and
// impossible to delete.
func prepareNetnsDir() {
	netnsDirOnce.Do(func() {
		os.MkdirAll(NetnsDir, 0o755)
		err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == unix.EINVAL { // not a mount point yet
			if unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, "") == nil {
				unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
			}
		}
	})
}

// newNamed creates a named network namespace without leaving any thread in it.
func newNamed(name string) (vnetns.NsHandle, error) {
	prepareNetnsDir()
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			rc <- result{vnetns.None(), err}
			return
		}
		defer orig.Close()
		h, err := vnetns.NewNamed(name) // moves this thread into the new namespace
		if serr := vnetns.Set(orig); serr != nil {
			rc <- result{h, errors.Join(err, serr)}
			return // thread stays locked and is destroyed
		}
		runtime.UnlockOSThread()
		rc <- result{h, err}
	}()
	r := <-rc
	if r.err != nil {
		return vnetns.None(), fmt.Errorf("create netns %s: %w", name, r.err)
	}
	return r.h, nil
}

// DeleteNamed removes a named namespace: its bind mount and the file. A
// missing one, or a file left unmounted by a crash mid-creation, is fine.
func DeleteNamed(name string) error {
	p := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// runName matches names spanperf gives: spanperf-<6 hex run id>[-suffix].
var runName = regexp.MustCompile(`^spanperf-([0-9a-f]{6})(-[a-z0-9-]+)?$`)

// RunOf returns the run ID in a name spanperf made, or "" for any other name.
func RunOf(name string) string {
	m := runName.FindStringSubmatch(name)
	if m == nil {
		return ""
	}
	return m[1]
}

// ListNamed returns the named namespaces whose names start with Prefix.
func ListNamed() []string {
	ents, _ := os.ReadDir(NetnsDir)
	var out []string
	for _, e := range ents {
		if RunOf(e.Name()) != "" {
			out = append(out, e.Name())
		}
	}
	return out
}

// writeSysctl writes a value under /proc/sys in the namespace of the calling thread.
func writeSysctl(key, val string) error {
	p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, val, err)
	}
	return nil
}

// Scratch runs fn with a netlink handle in a new, empty network namespace
// that is discarded afterwards: a preflight that tries a kernel feature
// without touching any real namespace.
func Scratch(fn func(h *netlink.Handle) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := vnetns.New() // moves this thread into the new namespace
		if err != nil {
			if vnetns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			errc <- fmt.Errorf("scratch netns: %w", err)
			return
		}
		h, err := netlink.NewHandleAt(ns)
		if err == nil {
			err = fn(h)
			h.Close()
		}
		ns.Close()
		if serr := vnetns.Set(orig); serr != nil {
			errc <- errors.Join(err, serr)
			return // thread stays locked and is destroyed
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}
