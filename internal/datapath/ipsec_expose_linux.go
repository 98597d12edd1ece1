package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// ipsecExposure is a service exposed through ipsec after setup: its
// address on the loopback of site server, carried by a child SA of its own
// (child) in every pair of sites that holds server.
type ipsecExposure struct {
	child  string
	server int
	addr   netip.Addr
}

// CanExpose: ipsec exposes a service in tunnel mode, on a new address with
// a new child SA per pair of sites that holds the server's site (a
// CREATE_CHILD_SA exchange in the IKE SA already up); transport mode
// protects the sites' own addresses only.
func (p *IPsec) CanExpose(string) error {
	if p.Implementation == IPsecLibreswan {
		return errors.New("with implementation libreswan: exposing a service after setup is strongSwan's only")
	}
	if p.Mode == "transport" {
		return errors.New("in transport mode: it protects the sites' own addresses only (use mode: tunnel)")
	}
	return nil
}

// exposureChildren writes, into site i's connection to site j, a child
// for each exposure of a service on either site: the service's address on
// its side, the other site's inner address on the other.
func (l *ipsecLink) exposureChildren(b *strings.Builder, i, j int) {
	for _, e := range l.exposures {
		if e.server != i && e.server != j {
			continue
		}
		ts := func(k int) string {
			if k == e.server {
				return netip.PrefixFrom(e.addr, 32).String()
			}
			return netip.PrefixFrom(ipsecInner(k), 32).String()
		}
		fmt.Fprintf(b, "\t\t\t%s {\n", e.child)
		b.WriteString("\t\t\t\tmode = tunnel\n")
		fmt.Fprintf(b, "\t\t\t\tesp_proposals = %s\n", l.p.Proposal)
		fmt.Fprintf(b, "\t\t\t\tlocal_ts = %s\n", ts(i))
		fmt.Fprintf(b, "\t\t\t\tremote_ts = %s\n", ts(j))
		b.WriteString("\t\t\t\tstart_action = none\n")
		b.WriteString("\t\t\t}\n")
	}
}

// reload rewrites every site's swanctl.conf with the exposures as they are
// now and loads its connections into its charon. strongSwan keeps a
// connection whose IKE settings did not change and replaces its children,
// so the IKE SAs stay up. The caller holds l.mu.
func (l *ipsecLink) reload(ctx context.Context) error {
	sites := make([]*netns.Site, len(l.sites))
	for i, s := range l.sites {
		sites[i] = s.site
	}
	for i, s := range l.sites {
		if err := os.WriteFile(s.swan, []byte(l.swanctlConf(i, sites, s.psk)), 0o600); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
		}
		if out, err := l.swanctl(ctx, s, "--load-conns", "--file", s.swan); err != nil {
			return fmt.Errorf("ipsec: load connections on site %s: %w\n%s%s", s.site.Name(), err, out, tail(s.daemon.Process))
		}
	}
	return nil
}

// expose is ipsec's Link.Expose: the service gets a new address on its
// site's loopback, every site's connections get a child for it, and each
// pair that holds the service's site brings its child up (the lower site
// of the pair initiates, as at setup). It returns once every child is up.
func (l *ipsecLink) expose(ctx context.Context, to testbed.Site, port int) (_ *Exposure, err error) {
	server := slices.IndexFunc(l.sites, func(s *ipsecSite) bool { return s.site.Name() == to.Name() })
	if server < 0 {
		return nil, fmt.Errorf("ipsec: expose on %s: not a site of the datapath", to.Name())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := ipsecExposure{child: fmt.Sprintf("svc-%d", l.nextChild), server: server, addr: freshServiceAddr()}
	l.nextChild++
	if err := loAddr(l.sites[server].site, e.addr, true); err != nil {
		return nil, fmt.Errorf("ipsec: expose: %w", err)
	}
	l.exposures = append(l.exposures, e)
	defer func() {
		if err != nil {
			l.unexpose(context.WithoutCancel(ctx), e)
		}
	}()
	if err := l.reload(ctx); err != nil {
		return nil, err
	}
	for j, peer := range l.sites {
		if j == server {
			continue
		}
		a, b := l.sites[min(j, server)], l.sites[max(j, server)]
		out, err := l.swanctl(ctx, a, "--initiate", "--ike", ipsecConnName(b.site), "--child", e.child, "--timeout", "30")
		if err != nil {
			return nil, fmt.Errorf("ipsec: expose: child SA %s %s → %s did not come up: %w\nswanctl:\n%s\ncharon on %s:\n%s",
				e.child, a.site.Name(), b.site.Name(), err, out, peer.site.Name(), peer.daemon.Process.Tail())
		}
	}
	target := testbed.AddrTarget(netip.AddrPortFrom(e.addr, uint16(port)))
	done := false
	return &Exposure{
		Target: func(testbed.Site) testbed.Target { return target },
		Undo: func(ctx context.Context) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if done {
				return nil
			}
			done = true
			return l.unexpose(ctx, e)
		},
	}, nil
}

// unexpose closes exposure e's child SAs, takes its children out of every
// site's connections and its address off its site's loopback. The caller
// holds l.mu.
func (l *ipsecLink) unexpose(ctx context.Context, e ipsecExposure) error {
	var errs []error
	for j := range l.sites {
		if j == e.server {
			continue
		}
		a := l.sites[min(j, e.server)]
		// An SA that never came up has nothing to close: swanctl says so.
		l.swanctl(ctx, a, "--terminate", "--child", e.child, "--timeout", "10")
	}
	l.exposures = slices.DeleteFunc(l.exposures, func(x ipsecExposure) bool { return x.child == e.child })
	if err := l.reload(ctx); err != nil {
		errs = append(errs, fmt.Errorf("ipsec: unexpose: %w", err))
	}
	if err := loAddr(l.sites[e.server].site, e.addr, false); err != nil {
		errs = append(errs, fmt.Errorf("ipsec: unexpose: %w", err))
	}
	return errors.Join(errs...)
}
