// Command wan measures the userspace WAN emulator's limits on this
// machine: the throughput a TCP stream reaches through it with 10 ms of
// one-way delay each way, beside the same stream with no emulator (this
// kernel has no netem to set beside it), and the emulator's delay error
// (how late it writes packets back) under that load and under a
// request/response load. Repetitions interleave the two sides; it prints
// medians. Run: bench/wan.sh
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/bench/internal/benchkit"
	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/wanemu"
	"github.com/spanperf/spanperf/internal/workload"
)

var (
	reps    = flag.Int("reps", 5, "repetitions (each runs both sides, in alternating order)")
	dur     = flag.Duration("duration", 5*time.Second, "measured time per side and repetition")
	delay   = flag.Duration("delay", 10*time.Millisecond, "one-way delay each way")
	streams = flag.Int("streams", 1, "parallel streams")
	maxBuf  = flag.Int("max-buffer", 32<<20, "tcp_rmem and tcp_wmem maximum in the sites, bytes")
)

func main() {
	agent.RunIfChild()
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sample is one side's figures in one repetition.
type sample struct {
	bps, emuCPU      float64 // stream throughput; emulator CPU seconds per second
	lateP50, lateP99 float64 // emulator lateness, µs
}

func run() error {
	ctx := context.Background()
	tb, err := netns.New(ctx, netns.Spec{Run: runner.NewID()})
	if err != nil {
		return err
	}
	defer tb.Close()
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	wan = tb.WAN()
	if _, err := workload.StartAgentServer(ctx, b, agent.DefaultPort); err != nil {
		return err
	}
	// Buffers above the bandwidth-delay product at the emulator's rate:
	// the defaults (tcp_wmem's 4 MiB) hold a 20 ms round trip to ~1.2 Gbit/s.
	for _, s := range []*netns.Site{a, b} {
		if err := s.Do(func() error {
			for _, k := range []string{"tcp_rmem", "tcp_wmem"} {
				if err := os.WriteFile("/proc/sys/net/ipv4/"+k, []byte("4096 131072 "+strconv.Itoa(*maxBuf)), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("socket buffers: %w", err)
		}
	}
	fmt.Printf("userspace WAN emulator: native testbed, %d reps × %s, %d stream(s), %v one way each way, host %s\n\n",
		*reps, *dur, *streams, *delay, benchkit.HostLine())
	spec := wanemu.LinkSpec{Delay: *delay}
	var native, emulated []sample
	for r := range *reps {
		n := func() error {
			s, err := stream(a, b, nil)
			native = append(native, s)
			return err
		}
		e := func() error {
			s, err := stream(a, b, &spec)
			emulated = append(emulated, s)
			return err
		}
		if err := benchkit.Alternate(r, n, e); err != nil {
			return err
		}
	}
	col := func(ss []sample, f func(sample) float64) []float64 {
		var out []float64
		for _, s := range ss {
			out = append(out, f(s))
		}
		return out
	}
	bps := func(s sample) float64 { return s.bps }
	nb, eb := col(native, bps), col(emulated, bps)
	fmt.Printf("stream, Gbit/s            native %.2f   emulated %.2f   ratio %.2f\n", benchkit.Median(nb)/1e9, benchkit.Median(eb)/1e9, benchkit.Median(eb)/benchkit.Median(nb))
	fmt.Printf("  per rep                 native [%s]   emulated [%s]\n", benchkit.FmtList(nb, 1e9), benchkit.FmtList(eb, 1e9))
	fmt.Printf("  emulator CPU            %.2f cores\n", benchkit.Median(col(emulated, func(s sample) float64 { return s.emuCPU })))
	fmt.Printf("  lateness under load     p50 %.0f µs, p99 %.0f µs (medians over reps)\n",
		benchkit.Median(col(emulated, func(s sample) float64 { return s.lateP50 })), benchkit.Median(col(emulated, func(s sample) float64 { return s.lateP99 })))
	fmt.Printf("  socket buffers          tcp_rmem and tcp_wmem up to %d B in both sites\n", *maxBuf)

	var rrNative, rrEmu, rrLate50, rrLate99 []float64
	for r := range *reps {
		n := func() error {
			p50, _, err := rr(a, b, nil)
			rrNative = append(rrNative, p50)
			return err
		}
		e := func() error {
			p50, st, err := rr(a, b, &spec)
			rrEmu = append(rrEmu, p50)
			rrLate50, rrLate99 = append(rrLate50, st.LatenessP50us), append(rrLate99, st.LatenessP99us)
			return err
		}
		if err := benchkit.Alternate(r, n, e); err != nil {
			return err
		}
	}
	added := benchkit.Median(rrEmu) - benchkit.Median(rrNative)
	fmt.Printf("\nrr 64 B, 1 connection      native p50 %.3f ms   emulated p50 %.3f ms   added %.3f ms (asked %v)\n",
		benchkit.Median(rrNative)*1e3, benchkit.Median(rrEmu)*1e3, added*1e3, 2**delay)
	fmt.Printf("  lateness                p50 %.0f µs, p99 %.0f µs (medians over reps)\n", benchkit.Median(rrLate50), benchkit.Median(rrLate99))
	return nil
}

// emulate starts an emulator in tb's wan namespace (nil spec: none).
func emulate(a, b *netns.Site, spec *wanemu.LinkSpec) (*wanemu.Emulator, error) {
	if spec == nil {
		return nil, nil
	}
	pa, pb := a.Prefix().Masked(), b.Prefix().Masked()
	var e *wanemu.Emulator
	err := wan.Do(func() (err error) {
		e, err = wanemu.New(wanemu.Spec{Routes: []wanemu.Route{{From: pa, To: pb, Link: *spec}, {From: pb, To: pa, Link: *spec}}})
		return err
	})
	return e, err
}

// wan is the testbed's wan namespace (set in run).
var wan *netns.Site

func stream(a, b *netns.Site, spec *wanemu.LinkSpec) (sample, error) {
	e, err := emulate(a, b, spec)
	if err != nil {
		return sample{}, err
	}
	c0, t0 := benchkit.ProcCPU(os.Getpid()), time.Now()
	exe, _ := os.Executable()
	out, _, err := benchkit.InSite(a, exe, "agent", "client", "--mode", "stream", "--target", b.Addr().String()+":7100",
		"--duration", dur.String(), "--warmup", "2s", "--message-size", "131072", "--streams", strconv.Itoa(*streams))
	s := sample{}
	if e != nil {
		s.emuCPU = (benchkit.ProcCPU(os.Getpid()) - c0) / time.Since(t0).Seconds()
		st := e.Stats()
		s.lateP50, s.lateP99 = st.LatenessP50us, st.LatenessP99us
		e.Close()
	}
	if err != nil {
		return s, err
	}
	var res agent.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return s, err
	}
	s.bps = res.Metrics["throughput_bps"]
	return s, nil
}

func rr(a, b *netns.Site, spec *wanemu.LinkSpec) (float64, wanemu.Stats, error) {
	e, err := emulate(a, b, spec)
	if err != nil {
		return 0, wanemu.Stats{}, err
	}
	exe, _ := os.Executable()
	out, _, err := benchkit.InSite(a, exe, "agent", "client", "--mode", "rr", "--target", b.Addr().String()+":7100",
		"--duration", dur.String(), "--warmup", "500ms", "--request-size", "64", "--response-size", "64", "--concurrency", "1")
	var st wanemu.Stats
	if e != nil {
		st = e.Stats()
		e.Close()
	}
	if err != nil {
		return 0, st, err
	}
	var res agent.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, st, err
	}
	return res.Metrics["latency_p50_s"], st, nil
}
