// Package benchkit holds what the benchmarks in bench/ share: running a
// tool to completion in a site with its CPU time, a process's CPU so far,
// interleaving two sides, medians and the host line.
package benchkit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// InSite runs a command to completion inside a site and returns its
// standard output and the CPU seconds (user+system) it and its waited-for
// children used.
func InSite(s *netns.Site, name string, args ...string) ([]byte, float64, error) {
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := s.Do(cmd.Start); err != nil {
		return nil, 0, err
	}
	if err := cmd.Wait(); err != nil {
		return out.Bytes(), 0, fmt.Errorf("%s: %v: %s", name, err, errb.String())
	}
	return out.Bytes(), (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), nil
}

// ProcCPU returns a process's CPU seconds so far (all threads), 0 when it
// cannot be read.
func ProcCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100 // USER_HZ
}

// Alternate runs the two sides of repetition r: ours first on even
// repetitions, theirs first on odd ones, so neither always runs on a
// machine the other just warmed.
func Alternate(r int, ours, theirs func() error) error {
	first, second := ours, theirs
	if r%2 == 1 {
		first, second = theirs, ours
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

// Median returns the median of xs, 0 for none.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FmtList formats xs divided by scale with two decimals, space-separated.
func FmtList(xs []float64, scale float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, strconv.FormatFloat(x/scale, 'f', 2, 64))
	}
	return strings.Join(out, " ")
}

// HostLine names the kernel and CPU count.
func HostLine() string {
	var u unix.Utsname
	unix.Uname(&u)
	return fmt.Sprintf("kernel %s, %d CPUs", unix.ByteSliceToString(u.Release[:]), runtime.NumCPU())
}
