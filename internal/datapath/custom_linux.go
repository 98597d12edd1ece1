package datapath

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// Custom is a datapath defined in the scenario file by shell commands: how a
// user measures a router, proxy or tunnel they installed themselves
// (skupper-router, Envoy, ztunnel, libreswan, socat...).
//
// Setup runs Up with `sh -c` in every site (all sites at once) and waits
// until each site is ready. Up either keeps running in the foreground (the
// process is then kept, and stopped at Close, with its whole process group)
// or exits 0 once what it started runs detached (`setsid -f`, a daemon that
// forks). A site is ready when Up is still running or has exited 0, every
// process named in Components runs in the site's namespace, and something
// listens on Ready (when set).
//
// Commands and addresses are templates: {site}, {site_addr}, {site_num}
// (1-based), {peer}, {peer_addr}, {peer_num}, {port} and {tmp} are replaced.
// In Up and Down, site is the site the command runs in, peer the next site
// (with two sites, the other one), port the service port (7100) and tmp a
// directory private to the site. In Target, site is the client's site, peer
// the site dialled and port the service's port there. Up and Down also get
// the environment SPANPERF_SITE, SPANPERF_SITE_ADDR, SPANPERF_SITE_NUM,
// SPANPERF_PEER, SPANPERF_PEER_ADDR, SPANPERF_PORT, SPANPERF_TMP and
// SPANPERF_SITES ("a=198.18.1.2 b=198.18.2.2").
type Custom struct {
	// Up sets the datapath up in one site; see Custom.
	Up string
	// Down, when set, runs in every site at Close, before Up's processes
	// and the components are stopped.
	Down string
	// Target is the address (IP:port template) a client dials.
	Target string
	// Components are the process names (as in /proc/PID/comm) that carry
	// traffic, looked up in each site's namespace once Up is ready.
	Components []string
	// Role is the components' role: relay, proxy, gateway, tunnel or switch.
	Role string
	// Ready, when set, is a TCP address template that must be listening in
	// the site before it counts as ready.
	Ready string
	// Timeout bounds how long each site may take to be ready; 0 means 30 s.
	Timeout time.Duration
	// Expose, Unexpose, Failover and FailoverTarget, when set, let the
	// datapath expose a service after setup and route to one served in
	// two sites (see CustomExposeFields).
	Expose, Unexpose, Failover, FailoverTarget string
}

var (
	_ Datapath = (*Custom)(nil)
	_ Checker  = (*Custom)(nil)
)

// CustomInfo registers Custom.
func CustomInfo() Info {
	return Info{
		Name:    "custom",
		Summary: "a datapath the scenario defines with shell commands run in each site (socat, skupper-router, Envoy...)",
		Options: append([]scenario.Field{
			{Name: "up", Kind: scenario.KindString, Required: true, Doc: "shell command (sh -c) run in every site at setup: it keeps running in the foreground (and is stopped at teardown), or exits 0 once what it started runs detached (setsid -f); " +
				"placeholders {site} {site_addr} {site_num} {peer} {peer_addr} {peer_num} {port} {tmp}, and the same as SPANPERF_SITE, SPANPERF_SITE_ADDR, SPANPERF_SITE_NUM, SPANPERF_PEER, SPANPERF_PEER_ADDR, SPANPERF_PORT, SPANPERF_TMP; SPANPERF_SITES lists name=addr of every site"},
			{Name: "down", Kind: scenario.KindString, Default: "", Doc: "shell command run in every site at teardown, before up's processes and the components are stopped (same placeholders and environment as up)"},
			{Name: "target", Kind: scenario.KindString, Default: "{peer_addr}:{port}", Doc: "IP:port a client dials; {site}/{site_addr} are the client's site, {peer}/{peer_addr}/{peer_num} the site dialled, {port} the service port (e.g. \"{site_addr}:17100\" for a local relay)"},
			{Name: "components", Kind: scenario.KindString, Default: "", Doc: "comma-separated process names (/proc/PID/comm) that carry the traffic, looked up in each site once up is ready (e.g. \"socat\"); empty: up's own process if it keeps running, else the kernel"},
			{Name: "role", Kind: scenario.KindString, Default: "relay", Enum: []string{"relay", "proxy", "gateway", "tunnel", "switch"}, Doc: "what the components do on the path"},
			{Name: "ready", Kind: scenario.KindString, Default: "", Doc: "TCP address template (e.g. \"{site_addr}:17100\") that must be listening in the site before it counts as ready; nothing connects to it"},
			{Name: "timeout", Kind: scenario.KindDuration, Default: 30 * time.Second, Doc: "how long each site may take to be ready"},
		}, customExposeFields...),
		Components: customComponents,
		New: func(o map[string]any) (Datapath, error) {
			c := &Custom{Target: "{peer_addr}:{port}", Role: "relay", Timeout: 30 * time.Second}
			str := func(name string, dst *string) {
				if v, ok := o[name].(string); ok && v != "" {
					*dst = v
				}
			}
			str("up", &c.Up)
			str("down", &c.Down)
			str("target", &c.Target)
			str("role", &c.Role)
			str("ready", &c.Ready)
			str("expose", &c.Expose)
			str("unexpose", &c.Unexpose)
			str("failover", &c.Failover)
			str("failover_target", &c.FailoverTarget)
			var comps string
			str("components", &comps)
			for _, name := range strings.Split(comps, ",") {
				if name = strings.TrimSpace(name); name != "" {
					c.Components = append(c.Components, name)
				}
			}
			if d, ok := o["timeout"].(time.Duration); ok && d > 0 {
				c.Timeout = d
			}
			return c, nil
		},
	}
}

// Check needs a shell and an up command.
func (c *Custom) Check(context.Context) error {
	if _, err := exec.LookPath("sh"); err != nil {
		return notSupported("custom: no sh in PATH (Debian package dash): %v", err)
	}
	if strings.TrimSpace(c.Up) == "" {
		return fmt.Errorf("custom: no up command: %w", ErrUnconfigured)
	}
	return nil
}

// customVars are one site's template values.
type customVars struct {
	site, siteAddr, peer, peerAddr string
	siteNum, peerNum, port         int
	tmp, sites                     string
	// backup and backupAddr: the second server's site (failover).
	backup, backupAddr string
}

func (v customVars) expand(s string) string {
	return strings.NewReplacer(
		"{site}", v.site, "{site_addr}", v.siteAddr, "{site_num}", strconv.Itoa(v.siteNum),
		"{peer}", v.peer, "{peer_addr}", v.peerAddr, "{peer_num}", strconv.Itoa(v.peerNum),
		"{port}", strconv.Itoa(v.port), "{tmp}", v.tmp,
		"{backup}", v.backup, "{backup_addr}", v.backupAddr,
	).Replace(s)
}

func (v customVars) env() []string {
	return []string{
		"SPANPERF_SITE=" + v.site, "SPANPERF_SITE_ADDR=" + v.siteAddr, "SPANPERF_SITE_NUM=" + strconv.Itoa(v.siteNum),
		"SPANPERF_PEER=" + v.peer, "SPANPERF_PEER_ADDR=" + v.peerAddr, "SPANPERF_PORT=" + strconv.Itoa(v.port),
		"SPANPERF_TMP=" + v.tmp, "SPANPERF_SITES=" + v.sites,
		"SPANPERF_BACKUP=" + v.backup, "SPANPERF_BACKUP_ADDR=" + v.backupAddr,
	}
}

// customSite is the datapath's state in one site.
type customSite struct {
	site *netns.Site
	vars customVars
	up   *shellProc
	kept bool // up keeps running
	// detach: up and what it starts outlive the controller (`spanperf up`).
	detach bool
	log    string    // up's stdout and stderr
	procs  []procRef // the components found
}

// procRef is a process found by name, told apart from a reused PID by its
// start time.
type procRef struct {
	pid   int
	start uint64
	comm  string
}

func (p procRef) alive() bool { return procRunning(p.pid, p.start) }

// Setup runs up in every site, waits until each is ready and finds the
// components.
func (c *Custom) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("custom: needs the local network-namespace testbed")
	}
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	var all []string
	for _, s := range sites {
		all = append(all, s.Name()+"="+s.Addr().String())
	}
	vars := func(i, j, port int) customVars {
		return customVars{
			site: sites[i].Name(), siteAddr: sites[i].Addr().String(), siteNum: i + 1,
			peer: sites[j].Name(), peerAddr: sites[j].Addr().String(), peerNum: j + 1,
			port: port, tmp: filepath.Join(tb.TempDir(), "custom-"+sites[i].Name()), sites: strings.Join(all, " "),
		}
	}
	// Every address a client may dial is known now: a bad template fails
	// before anything runs.
	targets := map[[2]string]netip.AddrPort{}
	for i := range sites {
		for j := range sites {
			s := vars(i, j, agent.DefaultPort).expand(c.Target)
			ap, err := netip.ParseAddrPort(s)
			if err != nil {
				return nil, fmt.Errorf("custom: target %q gives %q from %s to %s: want IP:port (placeholders {site} {site_addr} {site_num} {peer} {peer_addr} {peer_num} {port} {tmp}): %w",
					c.Target, s, sites[i].Name(), sites[j].Name(), err)
			}
			targets[[2]string{sites[i].Name(), sites[j].Name()}] = ap
		}
	}

	st := make([]*customSite, len(sites))
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.teardown(cctx, st)
		}
	}()
	for i, s := range sites {
		v := vars(i, (i+1)%len(sites), agent.DefaultPort)
		if err := os.MkdirAll(v.tmp, 0o700); err != nil {
			return nil, fmt.Errorf("custom on site %s: %w", s.Name(), err)
		}
		log := v.tmp + ".up.log"
		p, err := c.run(ctx, s, "up", v, log, ltb.Spec().Detach)
		if err != nil {
			return nil, err
		}
		_ = ltb.Ledger().AddPID(p.PID())
		st[i] = &customSite{site: s, vars: v, up: p, log: log, detach: ltb.Spec().Detach}
	}
	for _, cs := range st {
		if err := c.wait(ctx, ltb, cs); err != nil {
			return nil, err
		}
	}

	var comps []results.Component
	for _, cs := range st {
		seen := map[string]int{}
		for _, p := range cs.procs {
			name := p.comm
			if seen[p.comm]++; seen[p.comm] > 1 {
				name = fmt.Sprintf("%s-%d", p.comm, seen[p.comm])
			}
			comps = append(comps, results.Component{Name: name + "@" + cs.site.Name(), Role: c.Role, Site: cs.site.Name(), PID: p.pid})
		}
		if len(c.Components) == 0 && cs.kept {
			pid := cs.up.PID()
			comps = append(comps, results.Component{Name: procComm(pid, "custom-up") + "@" + cs.site.Name(), Role: c.Role, Site: cs.site.Name(), PID: pid})
		}
	}
	if len(comps) == 0 {
		// up configured the kernel and left nothing running.
		comps = []results.Component{KernelComponent()}
	}
	var once sync.Once
	var closeErr error
	ex := &customExposer{c: c, tb: ltb, sites: sites, vars: vars}
	return &Link{
		Expose:    ex.exposeFunc(),
		Redundant: ex.redundantFunc(),
		Target: AddrTargets(func(from, to testbed.Site, port int) netip.AddrPort {
			ap := targets[[2]string{from.Name(), to.Name()}]
			i, j := index(sites, from), index(sites, to)
			if port != agent.DefaultPort && i >= 0 && j >= 0 {
				if a, err := netip.ParseAddrPort(vars(i, j, port).expand(c.Target)); err == nil {
					ap = a
				}
			}
			return ap
		}),
		Components: comps,
		Alive: func() error {
			var errs []error
			for _, cs := range st {
				// up may finish after the site was ready; it fails the
				// trial if it failed, or if it was the component itself.
				select {
				case <-cs.up.Done():
					err := cs.up.Wait()
					if err == nil && cs.kept && len(c.Components) == 0 {
						err = errors.New("exit status 0")
					}
					if err != nil {
						errs = append(errs, fmt.Errorf("custom: up on site %s exited: %v%s", cs.site.Name(), exitStatus(err), fileTail(cs.log)))
					}
				default:
				}
				for _, p := range cs.procs {
					if !p.alive() {
						errs = append(errs, fmt.Errorf("custom: %s (pid %d) on site %s exited%s", p.comm, p.pid, cs.site.Name(), fileTail(cs.log)))
					}
				}
			}
			return errors.Join(errs...)
		},
		Close: func(ctx context.Context) error {
			once.Do(func() { closeErr = c.teardown(ctx, st) })
			return closeErr
		},
	}, nil
}

func index(sites []*netns.Site, s testbed.Site) int {
	return slices.IndexFunc(sites, func(x *netns.Site) bool { return x.Name() == s.Name() })
}

// run starts up or down with `sh -c` in site with the site's environment,
// its output going to the file log.
//
// The shell is not started with Site.Exec, which kills a process's group
// when it exits: up may exit 0 leaving daemons behind, whether they
// detached (setsid -f, a forking daemon racing its parent's exit) or not
// (`cmd &`). Its group is killed at teardown instead. Output goes to a file,
// not a pipe, which a daemon left running would hold open.
//
// Unless detach, the shell gets a parent-death signal, so that a killed
// controller takes it along; detached (a testbed of `spanperf up`, which
// exits at once), it runs in a session of its own and outlives the
// controller, as Site.Exec starts processes in such a testbed.
func (c *Custom) run(_ context.Context, site *netns.Site, which string, v customVars, log string, detach bool) (*shellProc, error) {
	script := map[string]string{"up": c.Up, "down": c.Down, "expose": c.Expose, "unexpose": c.Unexpose, "failover": c.Failover}[which]
	f, err := os.OpenFile(log, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("custom: %s on site %s: %w", which, site.Name(), err)
	}
	defer f.Close()
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("custom: %s on site %s: %w", which, site.Name(), err)
	}
	cmd := exec.Command(sh, "-c", v.expand(script))
	cmd.Env = append(os.Environ(), v.env()...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if detach {
		// A session leader leads its process group too: Stop still
		// signals the whole group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := site.Do(cmd.Start); err != nil {
		return nil, fmt.Errorf("custom: start %s on site %s: %w", which, site.Name(), err)
	}
	p := &shellProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// shellProc is up or down running in a site, leader of its process group.
type shellProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *shellProc) PID() int              { return p.cmd.Process.Pid }
func (p *shellProc) Done() <-chan struct{} { return p.done }
func (p *shellProc) Wait() error           { <-p.done; return p.err }

// Stop sends SIGTERM to the process group (the shell and what it left in
// its group, running or not), then SIGKILL after grace.
func (p *shellProc) Stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // the group is empty
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !groupRunning(pgid) {
			<-p.done
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// groupRunning reports whether a process of group pgid runs (zombies,
// which PID 1 may reap late, do not count).
func groupRunning(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		f := statFields(e.Name())
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// statFields returns the fields of /proc/PID/stat after the command name:
// state, ppid, pgrp, ...
func statFields(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// fileTail returns the last lines of the log at path, as tail does for a
// daemon's stderr.
func fileTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	if t := strings.Join(lines, "\n"); t != "" {
		return "\nlast log lines:\n" + t
	}
	return ""
}

// wait polls site cs until it is ready, up fails, or the timeout passes.
func (c *Custom) wait(ctx context.Context, tb *netns.Testbed, cs *customSite) error {
	name := cs.site.Name()
	var ready netip.AddrPort
	if c.Ready != "" {
		s := cs.vars.expand(c.Ready)
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("custom: ready %q gives %q on site %s: want IP:port: %w", c.Ready, s, name, err)
		}
		ready = ap
	}
	start := time.Now()
	deadline := start.Add(c.Timeout)
	for {
		exited := false
		select {
		case <-cs.up.Done():
			if err := cs.up.Wait(); err != nil {
				return fmt.Errorf("custom: up on site %s failed: %v\ncommand: %s%s", name, exitStatus(err), cs.vars.expand(c.Up), fileTail(cs.log))
			}
			exited = true
		default:
		}
		var missing []string
		procs, err := findInNetns(cs.site, c.Components)
		if err != nil {
			return fmt.Errorf("custom on site %s: %w", name, err)
		}
		for _, want := range c.Components {
			if !slices.ContainsFunc(procs, func(p procRef) bool { return p.comm == comm(want) }) {
				missing = append(missing, "process "+want)
			}
		}
		if ready.IsValid() {
			if ok, err := listening(cs.site, ready); err != nil {
				return fmt.Errorf("custom on site %s: %w", name, err)
			} else if !ok {
				missing = append(missing, "a listener on "+ready.String())
			}
		}
		// A foreground up with nothing else to wait for gets a moment to
		// fail (a typo, a missing program) before it counts as ready.
		if len(c.Components) == 0 && !ready.IsValid() && !exited && time.Since(start) < 500*time.Millisecond {
			missing = append(missing, "up to keep running")
		}
		if len(missing) == 0 {
			cs.procs = procs
			for _, p := range procs {
				_ = tb.Ledger().AddPID(p.pid)
			}
			if !exited {
				cs.kept = true
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("custom: site %s not ready after %s: no %s\ncommand: %s%s", name, c.Timeout, strings.Join(missing, ", no "), cs.vars.expand(c.Up), fileTail(cs.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exitStatus strips the process's own wrapping (which repeats its log) down
// to "exit status N".
func exitStatus(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee
	}
	return err
}

// teardown runs down in every site, stops up and the components, and
// removes the sites' directories.
func (c *Custom) teardown(ctx context.Context, st []*customSite) error {
	var errs []error
	if c.Down != "" {
		for _, cs := range st {
			if cs == nil {
				continue
			}
			errs = append(errs, c.runDown(ctx, cs))
		}
	}
	for _, cs := range st {
		if cs == nil {
			continue
		}
		cs.up.Stop(2 * time.Second)
		errs = append(errs, killNamed(cs, c.Components))
		errs = append(errs, os.RemoveAll(cs.vars.tmp), rmFile(cs.log), rmFile(cs.vars.tmp+".down.log"))
	}
	return errors.Join(errs...)
}

// killNamed stops the components found at setup and whatever else runs under
// their names in the site (a detached daemon's per-connection children):
// SIGTERM, then SIGKILL after 2 s.
func killNamed(cs *customSite, names []string) error {
	procs := slices.Clone(cs.procs)
	deadline := time.Now().Add(2 * time.Second)
	for sig := syscall.SIGTERM; ; {
		more, err := scanNetns(cs.site, names, true)
		if err != nil {
			return err
		}
		procs = append(procs, more...)
		var live []procRef
		for _, p := range procs {
			if p.alive() {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if sig == syscall.SIGKILL {
				return fmt.Errorf("custom: %s (pid %d) on site %s survived SIGKILL", live[0].comm, live[0].pid, cs.site.Name())
			}
			sig, deadline = syscall.SIGKILL, time.Now().Add(2*time.Second)
		}
		for _, p := range live {
			_ = syscall.Kill(p.pid, sig)
		}
		procs = live
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Custom) runDown(ctx context.Context, cs *customSite) error {
	log := cs.vars.tmp + ".down.log"
	p, err := c.run(ctx, cs.site, "down", cs.vars, log, cs.detach)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Stop(time.Second)
		return fmt.Errorf("custom: down on site %s: %w%s", cs.site.Name(), ctx.Err(), fileTail(log))
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("custom: down on site %s failed: %v\ncommand: %s%s", cs.site.Name(), exitStatus(err), cs.vars.expand(c.Down), fileTail(log))
	}
	return nil
}

func rmFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// comm is name as the kernel keeps it in /proc/PID/comm (15 bytes at most).
func comm(name string) string {
	if len(name) > 15 {
		return name[:15]
	}
	return name
}

// procComm returns pid's comm, or def.
func procComm(pid int, def string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return def
	}
	return strings.TrimSpace(string(b))
}

// procRunning reports whether pid runs (not a zombie) and started at start.
func procRunning(pid int, start uint64) bool {
	f := statFields(strconv.Itoa(pid))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && st == start
}

// findInNetns returns the running processes of site's network namespace
// whose comm is one of names, leaving out those whose parent has the same
// comm (a forking server's per-connection children).
func findInNetns(site *netns.Site, names []string) ([]procRef, error) {
	return scanNetns(site, names, false)
}

// scanNetns is findInNetns; with children it keeps every match.
func scanNetns(site *netns.Site, names []string, children bool) ([]procRef, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var ns unix.Stat_t
	if err := unix.Fstat(int(site.Handle()), &ns); err != nil {
		return nil, fmt.Errorf("stat namespace of site %s: %w", site.Name(), err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[comm(n)] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []procRef
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c := procComm(pid, "")
		if !want[c] {
			continue
		}
		var ps unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &ps) != nil || ps.Ino != ns.Ino || ps.Dev != ns.Dev {
			continue
		}
		start, err := testbed.ProcStart(pid)
		if err != nil || !procRunning(pid, start) {
			continue
		}
		if !children && procComm(ppid(pid), "") == c {
			continue
		}
		out = append(out, procRef{pid: pid, start: start, comm: c})
	}
	return out, nil
}

func ppid(pid int) int {
	f := statFields(strconv.Itoa(pid))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// listening reports whether a TCP socket in site listens on ap (or on the
// unspecified address at ap's port). It reads the namespace's socket table,
// so nothing connects to the listener.
func listening(site *netns.Site, ap netip.AddrPort) (bool, error) {
	found := false
	err := site.Do(func() error {
		for _, file := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
			f, err := os.Open(file)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return err
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) < 4 || fields[3] != "0A" { // 0A: TCP_LISTEN
					continue
				}
				local, ok := parseProcAddr(fields[1])
				if ok && local.Port() == ap.Port() && (local.Addr().IsUnspecified() || local.Addr().Unmap() == ap.Addr().Unmap()) {
					found = true
				}
			}
			f.Close()
		}
		return nil
	})
	return found, err
}

// parseProcAddr parses /proc/net/tcp's "0100007F:1F90": the address is
// printed as 32-bit words in host byte order.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	if len(h) != 8 && len(h) != 32 {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(h)/2)
	for i := 0; i < len(h); i += 8 {
		w, err := strconv.ParseUint(h[i:i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(b[i/2:], uint32(w))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port)), true
}
