package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// MTLSRelay is Skupper's application-router path on HAProxy: a client dials
// the relay in its own site, relays talk to each other over mutually
// authenticated TLS across the underlay, and the far relay delivers to the
// service on loopback.
//
// Each site runs one haproxy (role relay, name "haproxy"). Site i's relay
// listens in plain TCP on <addr i>:HAProxyLocalBasePort+j for the service
// in site j, and accepts mutual TLS from other relays on
// <addr i>:MTLSRelayPort. In the hub and chain topologies a relay sends
// to the next relay toward the destination, which forwards on its
// transit port (MTLSRelayTransitBasePort + j). Certificates come from a CA made for the run:
// relay-<site> for each site, with the CA in ca.pem. They and the haproxy
// configs live in <TempDir>/mtls-relay, which Link.Close removes.
type MTLSRelay struct {
	// TLSVersion is "1.2" or "1.3" (the default); the relays accept no other.
	TLSVersion string
	// Ciphers restricts the cipher suites: TLS 1.3 ciphersuites or TLS 1.2
	// OpenSSL ciphers, colon separated; empty means HAProxy's default.
	Ciphers string
}

var (
	_ Datapath = (*MTLSRelay)(nil)
	_ Checker  = (*MTLSRelay)(nil)
)

const mtlsRelayName = "mtls-relay"

// MTLSRelayInfo registers MTLSRelay.
func MTLSRelayInfo() Info {
	return Info{
		Name:    mtlsRelayName,
		Summary: "HAProxy relay per site, relays joined by mutual TLS (Skupper's application-router path)",
		Options: []scenario.Field{
			{Name: "tls_version", Kind: scenario.KindString, Doc: "TLS version between relays", Default: "1.3", Enum: []string{"1.2", "1.3"}},
			{Name: "ciphers", Kind: scenario.KindString, Doc: `cipher suites, colon separated (TLS 1.3 ciphersuites or TLS 1.2 OpenSSL ciphers); "" is HAProxy's default`, Default: ""},
		},
		Components: mtlsRelayComponents,
		New: func(o map[string]any) (Datapath, error) {
			r := &MTLSRelay{}
			r.TLSVersion, _ = o["tls_version"].(string)
			r.Ciphers, _ = o["ciphers"].(string)
			if r.TLSVersion == "" {
				r.TLSVersion = "1.3"
			}
			return r, r.Validate()
		},
	}
}

// Validate reports options the relay cannot use.
func (r *MTLSRelay) Validate() error {
	if r.TLSVersion != "1.2" && r.TLSVersion != "1.3" {
		return fmt.Errorf("%s: tls_version %q (want 1.2 or 1.3)", mtlsRelayName, r.TLSVersion)
	}
	if !hapCiphers.MatchString(r.Ciphers) {
		return fmt.Errorf("%s: ciphers %q: want OpenSSL cipher names separated by colons", mtlsRelayName, r.Ciphers)
	}
	return nil
}

// Check looks for haproxy built with OpenSSL.
func (r *MTLSRelay) Check(ctx context.Context) error { return hapCheck(ctx, mtlsRelayName) }

// tlsOptions is the TLS part of the relays' bind and server lines.
func (r *MTLSRelay) tlsOptions() string {
	v := "TLSv" + r.TLSVersion
	opts := "ssl-min-ver " + v + " ssl-max-ver " + v
	switch {
	case r.Ciphers == "":
	case r.TLSVersion == "1.3":
		opts += " ciphersuites " + r.Ciphers
	default:
		opts += " ciphers " + r.Ciphers
	}
	return opts
}

// RelayCertName is the name of the relay certificate of site.
func RelayCertName(site string) string { return "relay-" + site }

// config is the haproxy configuration of the relay in sites[i] in
// topology: a relay's connections for site j go to the next relay toward
// j (mtlsNextHop), and relays in the middle of paths forward for others.
func (r *MTLSRelay) config(topology string, sites []*netns.Site, i int, dir string) string {
	var b strings.Builder
	self := sites[i]
	crt := filepath.Join(dir, RelayCertName(self.Name())+".pem")
	ca := filepath.Join(dir, "ca.pem")
	tlsOpts := r.tlsOptions()
	b.WriteString(hapGlobal)
	fmt.Fprintf(&b, `
# Mutual TLS from the relays of other sites, delivered to the local service.
frontend from-relays
    bind %s ssl crt %s ca-file %s verify required %s
    default_backend service

backend service
    server service %s
`, netip.AddrPortFrom(self.Addr(), MTLSRelayPort), crt, ca, tlsOpts, hapService)
	b.WriteString(r.mtlsTransitConfig(topology, sites, i, crt, ca))
	for j, peer := range sites {
		if j == i {
			continue
		}
		hop, hopAddr := mtlsNextHop(topology, sites, i, j)
		name := RelayCertName(hop.Name())
		fmt.Fprintf(&b, `
# Clients of the service in site %[1]s, carried to the relay there.
frontend to-%[1]s
    bind %[2]s
    default_backend to-%[1]s

backend to-%[1]s
    server %[3]s %[4]s ssl crt %[5]s ca-file %[6]s verify required verifyhost %[3]s sni str(%[3]s) %[7]s
`, peer.Name(), netip.AddrPortFrom(self.Addr(), uint16(HAProxyLocalBasePort+j)), name,
			hopAddr, crt, ca, tlsOpts)
	}
	return b.String()
}

// Setup makes the run's CA and one certificate per relay, then starts a
// relay in every site.
func (r *MTLSRelay) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	ltb, pki, err := hapBegin(ctx, mtlsRelayName, tb, r.Check)
	if err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	var daemons Daemons
	defer func() {
		if err != nil {
			daemons.Stop(time.Second)
			pki.Close()
		}
	}()
	for _, s := range sites {
		if _, err := pki.Issue(RelayCertName(s.Name())); err != nil {
			return nil, fmt.Errorf("%s: %w", mtlsRelayName, err)
		}
	}
	topo := TopologyOf(tb)
	for i, s := range sites {
		listen := append(hapListen(sites, i, MTLSRelayPort), mtlsTransitListen(topo, sites, i)...)
		cfg := filepath.Join(pki.Dir(), "relay-"+s.Name()+".cfg")
		d, err := hapStart(ctx, mtlsRelayName, "relay", "haproxy", s, cfg, r.config(topo, sites, i, pki.Dir()), listen)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
	}
	link := &Link{
		Target:     AddrTargets(hapTarget(sites)),
		Components: daemons.Components(),
		Alive:      daemons.Alive,
		Expose:     r.exposeFunc(sites, pki.Dir()),
		Redundant:  r.redundantFunc(sites, pki.Dir()),
		Close: func(context.Context) error {
			daemons.Stop(2 * time.Second)
			return pki.Close()
		},
	}
	link.MaxConnections, link.MaxConnectionsBy = hapConnLimit()
	return link, nil
}
