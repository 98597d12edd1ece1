package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Metric names the tool drivers report beside the shared ones in results.
const (
	// MetricRequestsPerS is the achieved HTTP request rate (wrk, h2load).
	MetricRequestsPerS = results.RequestsPerS
	// MetricErrors counts failed requests: socket errors, non-2xx/3xx
	// responses, failed streams.
	MetricErrors = results.Errors
	// MetricTimeouts counts requests that timed out.
	MetricTimeouts = results.Timeouts
)

// Tool is an external program a driver runs, and the Debian package that
// provides it.
type Tool struct {
	// Prog is the program, looked up in PATH.
	Prog string
	// Pkg is the Debian package that installs Prog.
	Pkg string
}

// Check returns nil when Prog is in PATH, else an error wrapping
// testbed.ErrNotSupported that names the program and its package.
func (t Tool) Check() error {
	if _, err := exec.LookPath(t.Prog); err != nil {
		return fmt.Errorf("%w: %s not found in PATH (install Debian package %s)", testbed.ErrNotSupported, t.Prog, t.Pkg)
	}
	return nil
}

// toolChecks checks every tool and joins the errors.
func toolChecks(tools ...Tool) error {
	var errs []error
	for _, t := range tools {
		if err := t.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// intParam returns p[name] as an integer, def when absent.
func intParam(p results.Params, name string, def int64) int64 {
	switch v := p[name].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return def
}

// floatParam returns p[name] as a float, def when absent.
func floatParam(p results.Params, name string, def float64) float64 {
	switch v := p[name].(type) {
	case int64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	return def
}

// stringParam returns p[name] as a string, def when absent or empty.
func stringParam(p results.Params, name, def string) string {
	if s, ok := p[name].(string); ok && s != "" {
		return s
	}
	return def
}

// wholeSeconds rounds d up to whole seconds (at least min), for tools
// that only take integer durations.
func wholeSeconds(d time.Duration, min int) int {
	s := int(math.Ceil(d.Seconds()))
	if s < min {
		return min
	}
	return s
}

// waitListening waits until the process p's network namespace has a TCP
// socket listening on port (read from /proc/PID/net/tcp{,6}, which show
// the namespace of the process; for a process in a pod site, by `agent
// listening` in its server container), or p exits, ctx ends or limit
// passes.
func waitListening(ctx context.Context, site testbed.Site, name string, p testbed.Process, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	pid, local := testbed.PIDOf(p)
	if !local {
		return waitListeningPod(ctx, site, name, p, port, limit)
	}
	for {
		if listening(pid, port) {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited before listening on port %d: %v: %s", name, port, p.Wait(), p.Tail())
		case <-ctx.Done():
			p.Stop(time.Second)
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop(time.Second)
			return fmt.Errorf("%s not listening on port %d after %s: %s", name, port, limit, p.Tail())
		}
	}
}

// waitListeningPod is waitListening for a process p in a pod site: `agent
// listening` in the server container (the pod's one network namespace)
// waits for the socket, while p may exit first.
func waitListeningPod(ctx context.Context, site testbed.Site, name string, p testbed.Process, port int, limit time.Duration) error {
	cmd := agent.Command(name+"-listening", "listening", "--port", strconv.Itoa(port), "--wait", limit.String())
	cmd.Server = true
	w, err := site.Exec(ctx, cmd)
	if err != nil {
		p.Stop(time.Second)
		return err
	}
	select {
	case <-w.Done():
		if err := w.Wait(); err != nil {
			select {
			case <-p.Done():
				return fmt.Errorf("%s exited before listening on port %d: %v", name, port, p.Wait())
			case <-time.After(time.Second):
			}
			p.Stop(time.Second)
			return fmt.Errorf("%s not listening on port %d after %s: %v: %s", name, port, limit, err, p.Tail())
		}
		return nil
	case <-p.Done():
		w.Stop(time.Second)
		return fmt.Errorf("%s exited before listening on port %d: %v", name, port, p.Wait())
	case <-ctx.Done():
		w.Stop(time.Second)
		p.Stop(time.Second)
		return ctx.Err()
	}
}

// writeFile writes data to path in site's server container, through
// `agent write` (a pod's image may have no shell); owner, when not "",
// owns the file and the directories made for it.
func writeFile(ctx context.Context, site testbed.Site, path string, data []byte, perm os.FileMode, owner string) error {
	args := []string{"write", "--mode", fmt.Sprintf("%#o", perm)}
	if owner != "" {
		args = append(args, "--user", owner)
	}
	cmd := agent.Command("write", append(args, path)...)
	cmd.Server, cmd.Stdin = true, bytes.NewReader(data)
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := waitProcess(ctx, p, 30*time.Second); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// listening reports whether process pid's network namespace has a TCP
// socket listening on port.
func listening(pid, port int) bool { return agent.Listening(fmt.Sprintf("/proc/%d/net", pid), port) }

// startToolServer starts cmd in site and waits until it listens on port.
func startToolServer(ctx context.Context, site testbed.Site, cmd testbed.Command, port int) (testbed.Process, error) {
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Name, err)
	}
	if err := waitListening(ctx, site, cmd.Name, p, port, 10*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, err
	}
	return p, nil
}

// runToolClient runs cmd in site to its end, bounded by limit, and returns
// what it wrote to stdout and stderr, merged (the tools mix their results
// and errors across both). On a non-zero exit the output is returned with
// the error, which carries its tail: tools explain their errors there.
func runToolClient(ctx context.Context, site testbed.Site, cmd testbed.Command, limit time.Duration) ([]byte, error) {
	var out testbed.SyncBuffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Name, err)
	}
	if err := waitProcess(ctx, p, limit); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", cmd.Name, err, truncate(out.String(), 400))
	}
	return out.Bytes(), nil
}

// histogramMetrics encodes h and returns its latency metrics in seconds,
// with its sample count (results.LatencySamples); the caller applies
// results.DropThinTails to the metrics it returns.
func histogramMetrics(h *hdrhistogram.Histogram) (map[string]float64, string, error) {
	enc, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, "", fmt.Errorf("encode histogram: %w", err)
	}
	return results.LatencyMetrics(h), string(enc), nil
}

// newLatencyHist is a histogram of nanoseconds up to a minute, 3 digits.
func newLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(60*time.Second), 3)
}

// parseUnitDuration parses a tool's printed duration such as "268.65us",
// "3.39ms", "1.10s", "2m" into seconds.
func parseUnitDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		scale  float64
	}{{"us", 1e-6}, {"µs", 1e-6}, {"ms", 1e-3}, {"ns", 1e-9}, {"s", 1}, {"m", 60}, {"h", 3600}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			return v * u.scale, nil
		}
	}
	return 0, fmt.Errorf("duration %q: no unit", s)
}
