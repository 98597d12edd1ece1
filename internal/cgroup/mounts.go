package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// hierarchy is one mounted cgroup hierarchy that New creates groups in.
type hierarchy struct {
	// mount is where the hierarchy is mounted, e.g. /sys/fs/cgroup/cpu.
	mount string
	// v2 marks the unified hierarchy; cpu and cpuacct are then both true.
	v2 bool
	// cpu and cpuacct say which controllers a v1 hierarchy carries.
	cpu, cpuacct bool
}

// layout is where New creates a group: one v1 hierarchy carrying both cpu
// and cpuacct, two carrying one each, or the v2 unified hierarchy.
type layout []hierarchy

// cpuDir and acctDir return the hierarchies that carry the cpu and cpuacct
// controllers.
func (l layout) cpuDir() hierarchy {
	for _, h := range l {
		if h.cpu {
			return h
		}
	}
	return hierarchy{}
}

func (l layout) acctDir() hierarchy {
	for _, h := range l {
		if h.cpuacct {
			return h
		}
	}
	return hierarchy{}
}

// mountsFile lists the mounts of this process's mount namespace.
var mountsFile = "/proc/self/mounts"

// unifiedRoot is where a cgroup v2-only system mounts the unified hierarchy.
const unifiedRoot = "/sys/fs/cgroup"

// detect finds where this machine accounts and limits CPU.
func detect() (layout, error) {
	f, err := os.Open(mountsFile)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	l, err := parseMounts(f, func(mount string) []string {
		b, _ := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
		return strings.Fields(string(b))
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// parseMounts picks the layout from a mounts table in the /proc/self/mounts
// format. cgroup v1 wins when both cpu and cpuacct are mounted (separately or
// together); else the unified hierarchy at /sys/fs/cgroup is used when
// controllers (which reads its cgroup.controllers) lists cpu. A v2
// hierarchy mounted elsewhere on a hybrid system (/sys/fs/cgroup/unified)
// carries no controllers that v1 holds, so it is never picked.
func parseMounts(r io.Reader, controllers func(mount string) []string) (layout, error) {
	var cpu, acct *hierarchy
	var v2 string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		mount, typ := unescape(f[1]), f[2]
		switch typ {
		case "cgroup2":
			if v2 == "" && mount == unifiedRoot {
				v2 = mount
			}
		case "cgroup":
			opts := strings.Split(f[3], ",")
			h := hierarchy{mount: mount, cpu: slices.Contains(opts, "cpu"), cpuacct: slices.Contains(opts, "cpuacct")}
			if h.cpu && cpu == nil {
				cpu = &h
			}
			if h.cpuacct && acct == nil {
				acct = &h
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroup: read mounts: %w", err)
	}
	switch {
	case cpu != nil && acct != nil && cpu.mount == acct.mount:
		return layout{{mount: cpu.mount, cpu: true, cpuacct: true}}, nil
	case cpu != nil && acct != nil:
		return layout{{mount: cpu.mount, cpu: true}, {mount: acct.mount, cpuacct: true}}, nil
	case v2 != "" && slices.Contains(controllers(v2), "cpu"):
		return layout{{mount: v2, v2: true, cpu: true, cpuacct: true}}, nil
	case v2 != "":
		return nil, fmt.Errorf("%w: the unified hierarchy at %s does not offer the cpu controller", ErrNotSupported, v2)
	case cpu != nil:
		return nil, fmt.Errorf("%w: cgroup v1 cpuacct controller not mounted", ErrNotSupported)
	case acct != nil:
		return nil, fmt.Errorf("%w: cgroup v1 cpu controller not mounted", ErrNotSupported)
	}
	return nil, fmt.Errorf("%w: no cgroup hierarchy with the cpu controller is mounted", ErrNotSupported)
}

// unescape undoes the octal escapes (\040 for a space) of a mounts field.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ErrNotSupported says this machine cannot do what was asked: no cgroup
// hierarchy with the needed controller. The error wrapping it says why.
var ErrNotSupported = errors.New("not supported")
