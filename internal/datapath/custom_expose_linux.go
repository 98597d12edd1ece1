package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var (
	_ Exposer     = (*Custom)(nil)
	_ Redundancer = (*Custom)(nil)
)

// customExposeFields are the options of Custom for discovery and failover.
var customExposeFields = []scenario.Field{
	{Name: "expose", Kind: scenario.KindString, Default: "", Doc: "shell command run in the server's site to expose a service started after setup (discovery); it must exit 0 once the service is routed. " +
		"{site} {site_addr} are that site, {port} the service's port; a client dials target with that {port}. Empty: the datapath cannot expose"},
	{Name: "unexpose", Kind: scenario.KindString, Default: "", Doc: "shell command run in the server's site to undo expose (same placeholders)"},
	{Name: "failover", Kind: scenario.KindString, Default: "", Doc: "shell command run in the client's site that routes to a service served in two sites (failover) and keeps running in the foreground until it is stopped; " +
		"{site} {site_addr} are the client's site, {peer} {peer_addr} the preferred server's site, {backup} {backup_addr} the other's, {port} the service's port. Empty: the datapath cannot fail over"},
	{Name: "failover_target", Kind: scenario.KindString, Default: "", Doc: "IP:port template a client dials to reach the failover service (same placeholders as failover); the client's site is ready when something listens there"},
}

// CanExpose needs an expose command.
func (c *Custom) CanExpose(string) error {
	if c.Expose == "" {
		return errors.New("custom: no expose command (the datapath's expose key)")
	}
	return nil
}

// CanRouteRedundant needs a failover command and its target.
func (c *Custom) CanRouteRedundant(string) error {
	if c.Failover == "" || c.FailoverTarget == "" {
		return errors.New("custom: no failover command or failover_target (the datapath's failover and failover_target keys)")
	}
	return nil
}

// customExposer exposes services and routes failover through a Custom set
// up on tb.
type customExposer struct {
	c     *Custom
	tb    *netns.Testbed
	sites []*netns.Site
	vars  func(i, j, port int) customVars
}

// exposeFunc is Link.Expose: nil without an expose command.
func (x *customExposer) exposeFunc() ExposeFunc {
	if x.c.CanExpose("") != nil {
		return nil
	}
	return x.expose
}

// redundantFunc is Link.Redundant: nil without a failover command.
func (x *customExposer) redundantFunc() RedundantFunc {
	if x.c.CanRouteRedundant("") != nil {
		return nil
	}
	return x.redundant
}

// expose runs expose in site to and waits for it to exit 0.
func (x *customExposer) expose(ctx context.Context, to testbed.Site, port int) (*Exposure, error) {
	j := index(x.sites, to)
	if j < 0 {
		return nil, fmt.Errorf("custom: expose: %s is not a site of the testbed", to.Name())
	}
	v := x.vars(j, (j+1)%len(x.sites), port)
	if err := x.runOnce(ctx, x.sites[j], "expose", v); err != nil {
		return nil, err
	}
	targets := map[string]testbed.Target{}
	for i, s := range x.sites {
		t := x.vars(i, j, port).expand(x.c.Target)
		ap, err := netip.ParseAddrPort(t)
		if err != nil {
			x.undo(x.sites[j], v)
			return nil, fmt.Errorf("custom: target %q gives %q from %s to %s: want IP:port: %w", x.c.Target, t, s.Name(), to.Name(), err)
		}
		targets[s.Name()] = testbed.AddrTarget(ap)
	}
	done := false
	return &Exposure{
		Target: func(from testbed.Site) testbed.Target { return targets[from.Name()] },
		Undo: func(context.Context) error {
			if done {
				return nil
			}
			done = true
			return x.undo(x.sites[j], v)
		},
	}, nil
}

// undo runs unexpose, when set, in site with v.
func (x *customExposer) undo(site *netns.Site, v customVars) error {
	if x.c.Unexpose == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.c.Timeout)
	defer cancel()
	return x.runOnce(ctx, site, "unexpose", v)
}

// runOnce runs command which in site with v and waits, up to the
// datapath's timeout, for it to exit 0.
func (x *customExposer) runOnce(ctx context.Context, site *netns.Site, which string, v customVars) error {
	log := filepath.Join(v.tmp, which+".log")
	p, err := x.c.run(ctx, site, which, v, log, false)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Stop(time.Second)
		return fmt.Errorf("custom: %s on site %s: %w%s", which, site.Name(), ctx.Err(), fileTail(log))
	case <-time.After(x.c.Timeout):
		p.Stop(time.Second)
		return fmt.Errorf("custom: %s on site %s did not exit within %v%s", which, site.Name(), x.c.Timeout, fileTail(log))
	}
	if err := p.Wait(); err != nil {
		return fmt.Errorf("custom: %s on site %s failed: %v\ncommand: %s%s", which, site.Name(), exitStatus(err), v.expand(map[string]string{"expose": x.c.Expose, "unexpose": x.c.Unexpose}[which]), fileTail(log))
	}
	return nil
}

// redundant runs failover in site from, kept running until Undo, and
// waits until something listens on failover_target there.
func (x *customExposer) redundant(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Exposure, error) {
	i := index(x.sites, from)
	if i < 0 || len(to) != 2 {
		return nil, fmt.Errorf("custom: failover from %s to %d sites: wants a site of the testbed and two servers' sites", from.Name(), len(to))
	}
	p0, p1 := index(x.sites, to[0]), index(x.sites, to[1])
	if p0 < 0 || p1 < 0 {
		return nil, fmt.Errorf("custom: failover: %s or %s is not a site of the testbed", to[0].Name(), to[1].Name())
	}
	v := x.vars(i, p0, port)
	v.backup, v.backupAddr = x.sites[p1].Name(), x.sites[p1].Addr().String()
	t := v.expand(x.c.FailoverTarget)
	ap, err := netip.ParseAddrPort(t)
	if err != nil {
		return nil, fmt.Errorf("custom: failover_target %q gives %q on site %s: want IP:port: %w", x.c.FailoverTarget, t, from.Name(), err)
	}
	log := filepath.Join(v.tmp, "failover.log")
	p, err := x.c.run(ctx, x.sites[i], "failover", v, log, false)
	if err != nil {
		return nil, err
	}
	_ = x.tb.Ledger().AddPID(p.PID())
	deadline := time.Now().Add(x.c.Timeout)
	for {
		select {
		case <-p.Done():
			return nil, fmt.Errorf("custom: failover on site %s exited: %v\ncommand: %s%s", from.Name(), exitStatus(p.Wait()), v.expand(x.c.Failover), fileTail(log))
		default:
		}
		ok, err := listening(x.sites[i], ap)
		if err == nil && ok {
			break
		}
		if err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("nothing listens on %s after %v", ap, x.c.Timeout)
		}
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil {
			p.Stop(time.Second)
			return nil, fmt.Errorf("custom: failover on site %s: %w%s", from.Name(), err, fileTail(log))
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := false
	return &Exposure{
		Target: func(testbed.Site) testbed.Target { return testbed.AddrTarget(ap) },
		Undo: func(context.Context) error {
			if done {
				return nil
			}
			done = true
			p.Stop(2 * time.Second)
			return nil
		},
	}, nil
}
