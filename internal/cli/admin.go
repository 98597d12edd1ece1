package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/wanemu"
	"github.com/spanperf/spanperf/internal/workload"
)

func cmdUp(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "scenario file (sites, wan, datapath options)")
	dpName := fs.String("datapath", "", "datapath label or name (default: the scenario's first)")
	if fs.Parse(args) != nil || *file == "" {
		fmt.Fprintln(stderr, "usage: spanperf up -f FILE [--datapath X]")
		return 2
	}
	if err := requireRoot(); err != nil {
		fmt.Fprintln(stderr, "spanperf up:", err)
		return 1
	}
	src, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(stderr, "spanperf up:", err)
		return 1
	}
	var ov scenario.Overrides
	if *dpName != "" {
		ov.Datapaths = []string{*dpName}
	}
	s, err := loadScenario(*file, src, ov)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	spec := s.Datapaths[0]
	info, _ := plugins.Datapath(spec.Name)
	if s.IsKube() || info.Kube {
		fmt.Fprintf(stderr, "spanperf up: builds local testbeds only (network namespaces); %s on Kubernetes sites runs with spanperf run\n", spec.Name)
		return 1
	}
	ctx := context.Background()
	id := runner.NewID()
	tspec := runner.TestbedSpec(s, id)
	tspec.Detach = true
	tb, err := netns.New(ctx, tspec)
	if err != nil {
		fmt.Fprintln(stderr, "spanperf up:", err)
		netns.Clean(netns.CleanOptions{Detached: true, Run: id})
		return 1
	}
	defer tb.Close()
	fail := func(err error) int {
		fmt.Fprintln(stderr, "spanperf up:", err)
		netns.Clean(netns.CleanOptions{Detached: true, Run: id})
		return 1
	}
	dp, err := info.New(spec.Options)
	if err != nil {
		return fail(err)
	}
	link, err := datapath.Build(ctx, spec.Name, dp, tb)
	if err != nil {
		return fail(err)
	}
	wanPoint, err := runner.ShapeFirstWAN(ctx, s, tb)
	if err != nil {
		return fail(err)
	}
	client, server, target := runner.Endpoints(tb, link, agent.DefaultPort)
	srv, err := workload.StartAgentServer(ctx, server, agent.DefaultPort)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "testbed %s is up with datapath %s (%s), topology %s\n\n", id, spec.Label, spec.Name, tb.Topology())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "site\tnamespace\taddress\tenter with")
	for _, ls := range tb.LocalSites() {
		name := ls.Name()
		if tb.Node(ls) != nil {
			name += " (gateway)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tip netns exec %s bash\n", name, ls.Namespace(), ls.Prefix(), ls.Namespace())
	}
	for _, n := range tb.Nodes() {
		fmt.Fprintf(tw, "%s (node behind %s)\t%s\t%s\tip netns exec %s bash\n", n.Name(), n.Gateway().Name(), n.Namespace(), n.Prefix(), n.Namespace())
	}
	tw.Flush()
	if emu, _ := runner.WANEmulator(s); emu != "" {
		sum, err := wanSummary(s, len(tb.Sites()), wanPoint)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "\nThe wan emulator (%s) holds packets: %s%s.\n", emu, sum, sweepNote(s))
	}
	exe, _ := os.Executable()
	fmt.Fprintf(stdout, "\nAn agent server (pid %d) listens on port %d in site %s; through %s, site %s reaches it at %s:\n",
		pidOf(srv), agent.DefaultPort, server.Name(), spec.Label, client.Name(), target)
	fmt.Fprintf(stdout, "  ip netns exec %s %s agent client --mode rr --request-size 64 --response-size 64 --duration 5s --target %s\n",
		netns.NamespaceName(id, client.Name()), exe, target)
	fmt.Fprintln(stdout, "\nRemove it all with: spanperf down")
	return 0
}

func cmdClean(args []string, stdout, stderr io.Writer, detached bool) int {
	name := "clean"
	if detached {
		name = "down"
	}
	if !detached && slices.Contains(args, "--kube") || slices.Contains(args, "-kube") {
		return cmdCleanKube(args, stdout, stderr)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("kube", false, "clean Kubernetes instead: namespaces of dead runs and the objects they patched (with --context, --kubeconfig)")
	run := fs.String("run", "", "only this run or testbed ID")
	if fs.Parse(args) != nil {
		return 2
	}
	if err := requireRoot(); err != nil {
		fmt.Fprintf(stderr, "spanperf %s: %v\n", name, err)
		return 1
	}
	rep, err := netns.Clean(netns.CleanOptions{Detached: detached, Run: *run})
	for _, r := range rep.Removed {
		fmt.Fprintln(stdout, "removed", r)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintln(stdout, "left", s)
	}
	if len(rep.Removed) == 0 && err == nil {
		fmt.Fprintln(stdout, "nothing to remove")
	}
	if err != nil {
		fmt.Fprintf(stderr, "spanperf %s: %v\n", name, err)
		return 1
	}
	return 0
}

func cmdDoctor(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: spanperf doctor")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	ok := true
	line := func(kind, name string, err error) {
		status := "ok"
		if errors.Is(err, datapath.ErrUnconfigured) {
			status, err = "ok (the scenario defines it: up, target, components)", nil
		}
		if err != nil {
			status = "no: " + strings.ReplaceAll(err.Error(), "\n", "; ")
			if !errors.Is(err, datapath.ErrNotSupported) {
				ok = false
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", kind, name, status)
	}
	fmt.Fprintln(tw, "kind\tname\tcan run here")
	base := requireRoot()
	if base == nil {
		base = netns.Scratch(func(h *netlink.Handle) error {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}
			return h.LinkAdd(l)
		})
		if base != nil {
			base = fmt.Errorf("network namespaces with veth links: %w", base)
		}
	}
	line("testbed", "netns", base)
	// The wan's delay, jitter and loss: netem where the kernel has it, the
	// userspace emulator (a TUN device in the wan namespace) otherwise.
	netem, tun := base, base
	if base == nil {
		if netem = netns.NetemSupported(); netem != nil {
			netem = fmt.Errorf("%w: %w; wan delay, jitter and loss use the userspace emulator", datapath.ErrNotSupported, netem)
		}
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			tun = fmt.Errorf("the userspace emulator needs a TUN device: %w", err)
		}
	}
	line("wan", netns.EmulatorNetem, netem)
	line("wan", netns.EmulatorUserspace, tun)
	for _, d := range plugins.Datapaths() {
		check := func(opts map[string]any) error {
			if base != nil {
				return base
			}
			dp, err := d.New(opts)
			if err != nil {
				return err
			}
			if c, isChecker := dp.(datapath.Checker); isChecker {
				return c.Check(ctx)
			}
			return nil
		}
		line("datapath", d.Name, check(defaults(d.Options)))
		// Option sets with preflights of their own, e.g. "ipsec
		// implementation=libreswan".
		for _, v := range d.Doctor {
			opts, name := defaults(d.Options), d.Name
			for _, k := range slices.Sorted(maps.Keys(v)) {
				opts[k] = v[k]
				name += fmt.Sprintf(" %s=%v", k, v[k])
			}
			line("datapath", name, check(opts))
		}
	}
	for _, w := range plugins.Workloads() {
		var err error
		if c, isChecker := w.New().(workload.Checker); isChecker {
			err = c.Check(ctx)
		}
		line("workload", w.Name, err)
	}
	tw.Flush()
	if !ok {
		return 1
	}
	return 0
}

// defaults returns the default value of every field.
func defaults(fields []scenario.Field) map[string]any {
	m := map[string]any{}
	for _, f := range fields {
		if f.Default != nil {
			m[f.Name] = f.Default
		}
	}
	return m
}

func cmdList(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: spanperf list")
		return 2
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, kube := range []bool{false, true} {
		if kube {
			fmt.Fprintln(tw, "\t\nDATAPATHS ON KUBERNETES SITES (exposure adapters; sites listed with context:)\t")
		} else {
			fmt.Fprintln(tw, "DATAPATHS ON LOCAL SITES (network namespaces)\t")
		}
		for _, d := range plugins.Datapaths() {
			if d.Kube != kube {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\n", d.Name, d.Summary)
			for _, f := range d.Options {
				fmt.Fprintf(tw, "    %s\t%s%s\n", f.Name, f.Doc, defaultNote(f))
			}
		}
	}
	fmt.Fprintln(tw, "\t\nWORKLOADS\t")
	for _, w := range plugins.Workloads() {
		where := ""
		if !w.Pods {
			where = " (local sites only)"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", w.Name, w.Summary, where)
		for _, f := range w.Params {
			fmt.Fprintf(tw, "    %s\t%s%s\n", f.Name, f.Doc, defaultNote(f))
		}
	}
	return boolToStatus(tw.Flush() == nil)
}

// defaultNote says a field's default, if it has one.
func defaultNote(f scenario.Field) string {
	if f.Default == nil {
		return ""
	}
	return fmt.Sprintf(" (default %s)", results.FormatValue(f.Default))
}

func boolToStatus(ok bool) int {
	if ok {
		return 0
	}
	return 1
}

// pidOf is p's PID, 0 when p is not a local process.
func pidOf(p testbed.Process) int {
	pid, _ := testbed.PIDOf(p)
	return pid
}

// wanSummary says what the wan of s emulates at point p over sites sites:
// each distinct link spec with the pairs of sites that have it.
func wanSummary(s *scenario.Scenario, sites int, p results.Params) (string, error) {
	shape, err := runner.WANShape(s, sites, p)
	if err != nil {
		return "", err
	}
	pairs := map[string][]string{}
	for k, l := range shape {
		if k[0] < k[1] && l != (wanemu.LinkSpec{}) {
			h := linkWords(l)
			pairs[h] = append(pairs[h], testbed.SiteName(k[0])+"–"+testbed.SiteName(k[1]))
		}
	}
	var parts []string
	for _, spec := range slices.Sorted(maps.Keys(pairs)) {
		slices.Sort(pairs[spec])
		parts = append(parts, spec+" between "+strings.Join(pairs[spec], ", "))
	}
	return strings.Join(parts, "; "), nil
}

// linkWords says what link spec l does, in words: "delay 10ms, loss 1%".
func linkWords(l wanemu.LinkSpec) string {
	var w []string
	if l.Delay > 0 {
		w = append(w, "delay "+l.Delay.String())
	}
	if l.Jitter > 0 {
		w = append(w, "jitter "+l.Jitter.String())
	}
	if l.Loss > 0 {
		w = append(w, fmt.Sprintf("loss %g%%", l.Loss*100))
	}
	if l.RateBPS > 0 {
		w = append(w, fmt.Sprintf("rate %g Mbit/s", float64(l.RateBPS)/1e6))
	}
	return strings.Join(w, ", ")
}

// sweepNote tells, when s's wan sweeps, that up applied only its first point.
func sweepNote(s *scenario.Scenario) string {
	if len(s.WAN.Delay) > 1 || len(s.WAN.Jitter) > 1 || len(s.WAN.LossPercent) > 1 {
		return " (the first value of each sweep; spanperf run sweeps them all)"
	}
	return ""
}
