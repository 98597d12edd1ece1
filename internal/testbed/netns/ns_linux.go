package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
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

// newNamed creates a named network namespace without leaving any thread in it.
func newNamed(name string) (vnetns.NsHandle, error) {
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

// DeleteNamed removes a named namespace; a missing one is not an error.
func DeleteNamed(name string) error {
	err := vnetns.DeleteNamed(name)
	if err != nil && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ListNamed returns the named namespaces whose names start with Prefix.
func ListNamed() []string {
	ents, _ := os.ReadDir(NetnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
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
