package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var (
	_ Exposer     = (*MTLSRelay)(nil)
	_ Redundancer = (*MTLSRelay)(nil)
)

// Ports of the services mtls-relay exposes after setup, exposure k
// (0 to relayExposePorts-1) on each site's underlay address.
const (
	// RelayExposeInboundPort + k: the server site's relay accepts mutual
	// TLS for exposure k and delivers to its service on loopback.
	RelayExposeInboundPort = 18000
	// RelayExposeLocalPort + k: a client site's relay listens in plain
	// TCP for exposure k.
	RelayExposeLocalPort = 18500
	relayExposePorts     = 500
)

// Failover health checks of mtls-relay's client-site relay: each server
// is checked end to end (mutual TLS to its site's relay, which delivers to
// the service, and the service's answer) every RelayCheckInter; after a
// failure the next check comes RelayCheckFastInter later, and
// RelayCheckFall failures in a row mark it down.
//
// A killed server's check fails as soon as its relay's connection to it
// is refused, so the relay finds it down at most RelayCheckDetect after
// it died, plus a check's own time (a TLS handshake). A silent server
// (its site cut off) fails each check when the check's connection times
// out: HAProxy bounds that by min(timeout connect, inter), here
// RelayCheckInter, so it is found down at most RelayCheckDetectSilent
// after the cut. RelayCheckTimeout bounds the answer once connected: long,
// so that a slow answer on a loaded machine does not mark a live server
// down (a connection slower than RelayCheckInter still does: with
// 100 ms, live servers were marked down at load averages above 20 here).
const (
	RelayCheckInter        = 250 * time.Millisecond
	RelayCheckFastInter    = 50 * time.Millisecond
	RelayCheckFall         = 2
	RelayCheckDetect       = RelayCheckInter + (RelayCheckFall-1)*RelayCheckFastInter
	RelayCheckDetectSilent = RelayCheckInter + RelayCheckFall*RelayCheckInter + (RelayCheckFall-1)*RelayCheckFastInter
	RelayCheckTimeout      = time.Second
)

// CanExpose: mtls-relay exposes a service with a relay listener in every
// other site and a route to the server site's relay, in the mesh only.
func (r *MTLSRelay) CanExpose(topology string) error { return relayExposeTopology(topology) }

// CanRouteRedundant: mtls-relay routes a client to two sites' relays as
// one backend, with health checks (Skupper's redundant routing), in the
// mesh only.
func (r *MTLSRelay) CanRouteRedundant(topology string) error {
	return relayExposeTopology(topology)
}

// relayExposeTopology refuses the hub and the chain: an exposure's relay
// sections join the client's and the server's relays directly, which
// would bypass the sites in the middle.
func relayExposeTopology(topology string) error {
	if topology == testbed.TopologyHub || topology == testbed.TopologyChain {
		return fmt.Errorf("in topology %s: its exposures join two sites' relays directly, bypassing the sites in the middle", topology)
	}
	return nil
}

// relayExposer exposes services through an mtls-relay set up on a
// testbed.
//
// Each exposure is a new config section in the relays concerned, run as a
// haproxy of its own per site (named "haproxy-expose"): HAProxy changes
// its listeners only by loading a new configuration (a reload starts new
// workers with the whole config), and a separate process adds the
// listener and route without touching the relays that carry other
// traffic. Starting it costs what a reload does: parsing, loading the
// certificates, binding.
type relayExposer struct {
	r     *MTLSRelay
	sites []*netns.Site
	dir   string // the run's CA and certificates
}

// exposeFunc and redundantFunc are mtls-relay's Link.Expose and
// Link.Redundant.
func (r *MTLSRelay) exposeFunc(sites []*netns.Site, dir string) ExposeFunc {
	x := &relayExposer{r: r, sites: sites, dir: dir}
	return x.expose
}

func (r *MTLSRelay) redundantFunc(sites []*netns.Site, dir string) RedundantFunc {
	x := &relayExposer{r: r, sites: sites, dir: dir}
	return x.redundant
}

// inboundConfig is the section that accepts exposure k's mutual TLS in
// site j and delivers to port on loopback. A failed delivery is not
// retried: the client's relay, not this one, decides where to go next.
func (x *relayExposer) inboundConfig(j, k, port int) string {
	self := x.sites[j]
	return hapGlobal + fmt.Sprintf(`
# Exposure %[1]d: mutual TLS from other sites' relays, delivered to the service.
frontend in-%[1]d
    bind %[2]s ssl crt %[3]s ca-file %[4]s verify required %[5]s
    default_backend service-%[1]d

backend service-%[1]d
    retries 0
    server service 127.0.0.1:%[6]d
`, k, netip.AddrPortFrom(self.Addr(), uint16(RelayExposeInboundPort+k)), filepath.Join(x.dir, RelayCertName(self.Name())+".pem"),
		filepath.Join(x.dir, "ca.pem"), x.r.tlsOptions(), port)
}

// localConfig is the section of site i's relay that carries clients of
// exposure k to the relays of sites to: the first preferred, the others
// backups, each health-checked end to end when there are several.
func (x *relayExposer) localConfig(i, k int, to []int) string {
	self := x.sites[i]
	crt := filepath.Join(x.dir, RelayCertName(self.Name())+".pem")
	ca := filepath.Join(x.dir, "ca.pem")
	var b strings.Builder
	b.WriteString(hapGlobal)
	fmt.Fprintf(&b, `
# Exposure %[1]d: clients in this site, carried to the relay of the service's site.
frontend local-%[1]d
    bind %[2]s
    default_backend remote-%[1]d

backend remote-%[1]d
`, k, netip.AddrPortFrom(self.Addr(), uint16(RelayExposeLocalPort+k)))
	check := ""
	if len(to) > 1 {
		var opts string
		opts, check = hapHealthCheck()
		b.WriteString(opts)
	}
	for n, j := range to {
		peer := x.sites[j]
		name := RelayCertName(peer.Name())
		backup := ""
		if n > 0 {
			backup = " backup"
		}
		checkSSL := ""
		if check != "" {
			checkSSL = " check-ssl check-sni " + name
		}
		fmt.Fprintf(&b, "    server %[1]s %[2]s ssl crt %[3]s ca-file %[4]s verify required verifyhost %[1]s sni str(%[1]s) %[5]s%[6]s%[7]s%[8]s\n",
			name, netip.AddrPortFrom(peer.Addr(), uint16(RelayExposeInboundPort+k)), crt, ca, x.r.tlsOptions(), check, checkSSL, backup)
	}
	return b.String()
}

// startAll starts the given configs (site index → config) at once, each
// a haproxy ready when it listens on its site's address at port (site
// index → port), and waits for all. On error it stops what it started.
func (x *relayExposer) startAll(ctx context.Context, k int, cfgs map[int]string, ports map[int]uint16) (Daemons, error) {
	var mu sync.Mutex
	var ds Daemons
	var errs []error
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := x.sites[i]
			d, err := hapStartFast(ctx, mtlsRelayName, "relay", s, filepath.Join(x.dir, fmt.Sprintf("expose-%d-%s.cfg", k, s.Name())), cfg,
				netip.AddrPortFrom(s.Addr(), ports[i]))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ds = append(ds, d)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		ds.Stop(time.Second)
		return nil, err
	}
	return ds, nil
}

// hapStartFast is hapStart for an exposure's haproxy ("haproxy-expose",
// of datapath dp in role), whose start is timed: it polls for the
// listener every 2 ms, not StartDaemon's 20.
func hapStartFast(ctx context.Context, dp, role string, site *netns.Site, path, cfg string, listen netip.AddrPort) (*Daemon, error) {
	if err := pki.WriteSecret(path, []byte(cfg)); err != nil {
		return nil, fmt.Errorf("%s: config on site %s: %w", dp, site.Name(), err)
	}
	cmd := testbed.Command{Name: "haproxy-expose", Path: "haproxy", Args: []string{"-db", "-f", path}}
	d, err := StartDaemon(ctx, dp, role, site, cmd, nil, 0)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(haproxyStartTimeout)
	for {
		select {
		case <-d.Process.Done():
			return nil, d.exitError()
		default:
		}
		err := site.Do(func() error { return hapListening([]netip.AddrPort{listen}) })
		if err == nil {
			return d, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			d.Process.Stop(time.Second)
			return nil, fmt.Errorf("%s: haproxy-expose on site %s not ready after %s: %v%s", dp, site.Name(), haproxyStartTimeout, err, tail(d.Process))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// exposure wraps the started relays of exposure k.
func (x *relayExposer) exposure(k int, ds Daemons, target func(from testbed.Site) testbed.Target, cfgs map[int]string) *Exposure {
	done := false
	return &Exposure{
		Target: target,
		Undo: func(context.Context) error {
			if done {
				return nil
			}
			done = true
			ds.Stop(2 * time.Second)
			var errs []error
			for i := range cfgs {
				errs = append(errs, rmFile(filepath.Join(x.dir, fmt.Sprintf("expose-%d-%s.cfg", k, x.sites[i].Name()))))
			}
			return errors.Join(errs...)
		},
	}
}

// expose starts, at once, the inbound section in the server's site and a
// local section in every other site.
func (x *relayExposer) expose(ctx context.Context, to testbed.Site, port int) (*Exposure, error) {
	j, err := siteIndex(mtlsRelayName, x.sites, to)
	if err != nil {
		return nil, err
	}
	k := int(exposeSeq.Add(1) % relayExposePorts)
	cfgs := map[int]string{j: x.inboundConfig(j, k, port)}
	ports := map[int]uint16{j: uint16(RelayExposeInboundPort + k)}
	for i := range x.sites {
		if i != j {
			cfgs[i] = x.localConfig(i, k, []int{j})
			ports[i] = uint16(RelayExposeLocalPort + k)
		}
	}
	ds, err := x.startAll(ctx, k, cfgs, ports)
	if err != nil {
		return nil, err
	}
	server := x.sites[j]
	return x.exposure(k, ds, func(from testbed.Site) testbed.Target {
		if from.Name() == server.Name() {
			return testbed.AddrTarget(netip.AddrPortFrom(server.Addr(), uint16(port)))
		}
		return testbed.AddrTarget(netip.AddrPortFrom(siteAddr(from), uint16(RelayExposeLocalPort+k)))
	}, cfgs), nil
}

// redundant starts an inbound section in every server site and, in the
// client's site, a local section with the first server preferred and the
// others as backups, health-checked end to end.
func (x *relayExposer) redundant(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Exposure, error) {
	i, js, err := redundantSites(mtlsRelayName, x.sites, from, to)
	if err != nil {
		return nil, err
	}
	k := int(exposeSeq.Add(1) % relayExposePorts)
	cfgs, ports := map[int]string{}, map[int]uint16{}
	for _, j := range js {
		cfgs[j] = x.inboundConfig(j, k, port)
		ports[j] = uint16(RelayExposeInboundPort + k)
	}
	cfgs[i] = x.localConfig(i, k, js)
	ports[i] = uint16(RelayExposeLocalPort + k)
	ds, err := x.startAll(ctx, k, cfgs, ports)
	if err != nil {
		return nil, err
	}
	target := testbed.AddrTarget(netip.AddrPortFrom(x.sites[i].Addr(), uint16(RelayExposeLocalPort+k)))
	return x.exposure(k, ds, func(testbed.Site) testbed.Target { return target }, cfgs), nil
}

// hapHealthCheck is how the HAProxy datapaths check each server of a
// redundant route end to end (RelayCheckInter and the others): the
// backend's options, and what each server line adds (with check-ssl and
// its check-sni). The check asks the service its name (agent mode who)
// through the far proxy: a proxy whose service is gone fails it.
func hapHealthCheck() (backend, server string) {
	backend = fmt.Sprintf(`    option tcp-check
    tcp-check send-binary 53504631030000000000000000000000
    tcp-check expect rbinary ^[0-9A-Fa-f]{2}
    option redispatch
    retries 1
    timeout check %dms
`, RelayCheckTimeout.Milliseconds())
	server = fmt.Sprintf(" check inter %dms fastinter %dms fall %d rise 1", RelayCheckInter.Milliseconds(), RelayCheckFastInter.Milliseconds(), RelayCheckFall)
	return backend, server
}
