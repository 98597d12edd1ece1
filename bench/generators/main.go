// Command generators compares spanperf's built-in generators with the
// standard tools on one native two-site testbed, interleaved, with
// repetitions: stream against iperf3 (same message size and stream count),
// rr (64 B, concurrency 1) against sockperf ping-pong; and it times
// `spanperf up` + `spanperf down` of a vxlan testbed through the binary.
// It prints medians and ratios. Run: bench/generators.sh
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/bench/internal/benchkit"
	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

var (
	reps     = flag.Int("reps", 5, "repetitions (each runs every side once, in alternating order)")
	dur      = flag.Duration("duration", 5*time.Second, "measured time per side and repetition")
	msg      = flag.Int("message-size", 131072, "stream message size")
	msgSmall = flag.Int("small-message-size", 1024, "second stream message size (0: skip)")
	streams  = flag.Int("streams", 1, "parallel streams")
	upReps   = flag.Int("up-reps", 10, "testbed up+down repetitions")
	upOnly   = flag.Bool("up-down-only", false, "only time spanperf up + down")
	// spanperfBin is the binary whose up and down are timed.
	spanperfBin = flag.String("spanperf", "bin/spanperf", "the spanperf binary whose `up` and `down` are timed")
)

// sample is one side's result in one repetition.
type sample struct {
	rate   float64 // bits/s or round trips/s
	cpu    float64 // client+server CPU seconds
	amount float64 // bytes moved (stream) or round trips (rr)
}

func main() {
	agent.RunIfChild()
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	if *upOnly {
		return upDown()
	}
	for _, p := range []string{"iperf3", "sockperf"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s not found (Debian package %s; `make bench` installs it)", p, p)
		}
	}
	ctx := context.Background()
	tb, err := netns.New(ctx, netns.Spec{Run: runner.NewID()})
	if err != nil {
		return err
	}
	defer tb.Close()
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	srv, err := workload.StartAgentServer(ctx, b, agent.DefaultPort)
	if err != nil {
		return err
	}
	ip3, err := b.Exec(ctx, testbed.Command{Name: "iperf3", Path: "iperf3", Args: []string{"-s", "-p", "5201"}})
	if err != nil {
		return err
	}
	sp, err := b.Exec(ctx, testbed.Command{Name: "sockperf", Path: "sockperf", Args: []string{"server", "--tcp", "-i", b.Addr().String(), "-p", "11111"}})
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("spanperf generators vs standard tools: native testbed, %d reps × %s, host %s\n\n", *reps, *dur, benchkit.HostLine())

	sizes := []int{*msg}
	if *msgSmall > 0 {
		sizes = append(sizes, *msgSmall)
	}
	for _, size := range sizes {
		var ours, theirs []sample
		for r := 0; r < *reps; r++ {
			o := func() error {
				s, err := ourStream(a, b, pidOf(srv), size)
				ours = append(ours, s)
				return err
			}
			t := func() error {
				s, err := iperfStream(a, b, pidOf(ip3), size)
				theirs = append(theirs, s)
				return err
			}
			if err := benchkit.Alternate(r, o, t); err != nil {
				return err
			}
		}
		report(fmt.Sprintf("stream %d B × %d stream", size, *streams), "spanperf stream", "iperf3", "Gbit/s", 1e9, ours, theirs)
	}
	var ours, theirs []sample
	for r := 0; r < *reps; r++ {
		o := func() error {
			s, err := ourRR(a, b, pidOf(srv))
			ours = append(ours, s)
			return err
		}
		t := func() error {
			s, err := sockperfRR(a, b, pidOf(sp))
			theirs = append(theirs, s)
			return err
		}
		if err := benchkit.Alternate(r, o, t); err != nil {
			return err
		}
	}
	report("rr 64 B, concurrency 1", "spanperf rr", "sockperf ping-pong", "k round trips/s", 1e3, ours, theirs)
	return upDown()
}

func ourStream(a, b *netns.Site, srvPID, size int) (sample, error) {
	exe, _ := os.Executable()
	c0 := benchkit.ProcCPU(srvPID)
	out, cpu, err := benchkit.InSite(a, exe, "agent", "client", "--mode", "stream", "--target", b.Addr().String()+":7100",
		"--duration", dur.String(), "--warmup", "1s", "--message-size", strconv.Itoa(size), "--streams", strconv.Itoa(*streams))
	if err != nil {
		return sample{}, err
	}
	var res agent.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return sample{}, err
	}
	// CPU over the whole client run (warmup included) on both sides, bytes likewise.
	total := res.Metrics["bytes"] * (dur.Seconds() + 1) / dur.Seconds()
	return sample{rate: res.Metrics["throughput_bps"], cpu: cpu + benchkit.ProcCPU(srvPID) - c0, amount: total}, nil
}

func iperfStream(a, b *netns.Site, srvPID, size int) (sample, error) {
	c0 := benchkit.ProcCPU(srvPID)
	secs := strconv.FormatFloat(dur.Seconds()+1, 'f', -1, 64)
	out, cpu, err := benchkit.InSite(a, "iperf3", "-c", b.Addr().String(), "-p", "5201", "-J", "-t", secs, "-O", "1",
		"-l", strconv.Itoa(size), "-P", strconv.Itoa(*streams))
	if err != nil {
		return sample{}, err
	}
	var res struct {
		End struct {
			SumReceived struct {
				Bps   float64 `json:"bits_per_second"`
				Bytes float64 `json:"bytes"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return sample{}, err
	}
	// -O 1 omits the first second from the figures but not from the CPU: count its bytes too.
	total := res.End.SumReceived.Bytes * (dur.Seconds() + 1) / dur.Seconds()
	return sample{rate: res.End.SumReceived.Bps, cpu: cpu + benchkit.ProcCPU(srvPID) - c0, amount: total}, nil
}

func ourRR(a, b *netns.Site, srvPID int) (sample, error) {
	exe, _ := os.Executable()
	c0 := benchkit.ProcCPU(srvPID)
	out, cpu, err := benchkit.InSite(a, exe, "agent", "client", "--mode", "rr", "--target", b.Addr().String()+":7100",
		"--duration", dur.String(), "--warmup", "1s", "--request-size", "64", "--response-size", "64", "--concurrency", "1")
	if err != nil {
		return sample{}, err
	}
	var res agent.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return sample{}, err
	}
	return sample{rate: res.Metrics["transactions_per_s"], cpu: cpu + benchkit.ProcCPU(srvPID) - c0, amount: res.Metrics["transactions"]}, nil
}

var validRe = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)`)

func sockperfRR(a, b *netns.Site, srvPID int) (sample, error) {
	c0 := benchkit.ProcCPU(srvPID)
	secs := strconv.Itoa(int(dur.Seconds() + 1))
	out, cpu, err := benchkit.InSite(a, "sockperf", "ping-pong", "--tcp", "-i", b.Addr().String(), "-p", "11111", "-m", "64", "-t", secs)
	if err != nil {
		return sample{}, err
	}
	m := validRe.FindSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("sockperf: no [Valid Duration] line in %q", firstLines(out))
	}
	rt, _ := strconv.ParseFloat(string(m[1]), 64)
	recv, _ := strconv.ParseFloat(string(m[3]), 64)
	return sample{rate: recv / rt, cpu: cpu + benchkit.ProcCPU(srvPID) - c0, amount: recv}, nil
}

func firstLines(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var out []string
	for i := 0; i < 5 && sc.Scan(); i++ {
		out = append(out, sc.Text())
	}
	return strings.Join(out, " | ")
}

// report prints both sides' medians and the ratio; for streams also CPU
// seconds per GB, for rr CPU microseconds per round trip.
func report(title, us, them, unit string, scale float64, ours, theirs []sample) {
	col := func(ss []sample, f func(sample) float64) (vals []float64) {
		for _, s := range ss {
			vals = append(vals, f(s))
		}
		return
	}
	rate := func(s sample) float64 { return s.rate }
	var costName string
	cost := func(s sample) float64 { return s.cpu / (s.amount / 1e9) }
	costName = "CPU s per GB"
	if unit != "Gbit/s" {
		cost = func(s sample) float64 { return s.cpu / s.amount * 1e6 }
		costName = "CPU µs per round trip"
	}
	ro, rt := benchkit.Median(col(ours, rate)), benchkit.Median(col(theirs, rate))
	co, ct := benchkit.Median(col(ours, cost)), benchkit.Median(col(theirs, cost))
	fmt.Printf("%s\n", title)
	fmt.Printf("  %-20s %8.2f %s   %s %.3f   per rep: %s\n", us, ro/scale, unit, costName, co, benchkit.FmtList(col(ours, rate), scale))
	fmt.Printf("  %-20s %8.2f %s   %s %.3f   per rep: %s\n", them, rt/scale, unit, costName, ct, benchkit.FmtList(col(theirs, rate), scale))
	fmt.Printf("  ratio (median): rate %.2f×, CPU per unit %.2f×\n\n", ro/rt, co/ct)
}

// upDown times `spanperf up` plus `spanperf down` of a two-site vxlan
// testbed as the CLI does them: through the binary, each a process of its
// own, from the start of up to the end of down.
func upDown() error {
	scen, err := os.CreateTemp("", "bench-updown-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(scen.Name())
	if _, err := scen.WriteString("name: updown\ndatapaths: [vxlan]\nworkloads:\n  - type: rr\n"); err != nil {
		return err
	}
	scen.Close()
	var times []float64
	for i := 0; i < *upReps; i++ {
		t0 := time.Now()
		out, err := exec.Command(*spanperfBin, "up", "-f", scen.Name()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s up: %v: %s", *spanperfBin, err, firstLines(out))
		}
		f := strings.Fields(string(out))
		if len(f) < 2 || f[0] != "testbed" {
			return fmt.Errorf("%s up printed no testbed ID: %s", *spanperfBin, firstLines(out))
		}
		if out, err := exec.Command(*spanperfBin, "down", "--run", f[1]).CombinedOutput(); err != nil {
			return fmt.Errorf("%s down --run %s: %v: %s", *spanperfBin, f[1], err, firstLines(out))
		}
		times = append(times, time.Since(t0).Seconds())
	}
	fmt.Printf("spanperf up + spanperf down, 2 sites + vxlan, through %s: median %.3f s over %d (min %.3f, max %.3f)\n",
		*spanperfBin, benchkit.Median(times), len(times), slices.Min(times), slices.Max(times))
	return nil
}

// pidOf is p's PID: the bench runs on local sites only.
func pidOf(p testbed.Process) int {
	pid, _ := testbed.PIDOf(p)
	return pid
}
