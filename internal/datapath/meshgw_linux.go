package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// MeshGateway is Istio's multi-primary east-west path on HAProxy. Every
// site runs two haproxy processes:
//
//   - a proxy (role proxy, name "haproxy-proxy"), the sidecar: for clients
//     in its site it listens in plain TCP on <addr>:HAProxyLocalBasePort+j
//     and originates mutual TLS to the proxy of site j, with SNI
//     MeshSNI(site j), through site j's gateway; for its own site's service
//     it terminates mutual TLS on <addr>:MeshInboundPort and delivers to the
//     service on loopback;
//   - an east-west gateway (role gateway, name "haproxy-gateway") on
//     <addr>:MeshGatewayPort that routes by the SNI of the proxies' TLS to
//     the local proxy without terminating it.
//
// With Double (ambient mode's double encryption) the layers are carried by:
//
//   - inner mutual TLS (client proxy ⇄ destination proxy, SNI MeshSNI):
//     originated by haproxy-proxy in the client's site, terminated by
//     haproxy-proxy in the server's site;
//   - outer mutual TLS (client proxy ⇄ gateway, SNI and verified name
//     GatewayCertName(site j)): originated by the same haproxy-proxy in the
//     client's site, which chains its inner origination into a second
//     frontend through an abstract unix socket (ztunnel, too, does both in
//     one process), and terminated by haproxy-gateway in the server's site.
//
// The gateway reads the inner TLS's SNI in the decrypted stream and forwards
// that still encrypted stream to the destination proxy.
//
// Certificates come from a CA made for the run: proxy-<site>, also valid
// for MeshSNI(site) (haproxy verifies a server against the SNI it sends, as
// Istio verifies the identity behind a service), and gateway-<site>, with
// the CA in ca.pem. They and the haproxy configs live in
// <TempDir>/mesh-gateway, which Link.Close removes. TLS is 1.3 throughout.
type MeshGateway struct {
	// Double carries the inner mutual TLS inside an outer mutual TLS to the
	// gateway (ambient mode); false is sidecar mode.
	Double bool
}

var (
	_ Datapath = (*MeshGateway)(nil)
	_ Checker  = (*MeshGateway)(nil)
)

const meshGatewayName = "mesh-gateway"

// MeshGatewayInfo registers MeshGateway.
func MeshGatewayInfo() Info {
	return Info{
		Name:    meshGatewayName,
		Summary: "HAProxy sidecar proxies and an SNI-routing east-west gateway per site, mutual TLS end to end (Istio multi-primary)",
		Options: []scenario.Field{
			{Name: "double", Kind: scenario.KindBool, Doc: "carry the proxies' mutual TLS inside mutual TLS to the gateway (ambient mode)", Default: false},
		},
		Components: meshGatewayComponents,
		New: func(o map[string]any) (Datapath, error) {
			d, _ := o["double"].(bool)
			return &MeshGateway{Double: d}, nil
		},
	}
}

// Check looks for haproxy built with OpenSSL.
func (m *MeshGateway) Check(ctx context.Context) error { return hapCheck(ctx, meshGatewayName) }

// MeshSNI is the server name that clients' proxies send for the service in
// site: Istio's name for the service's outbound cluster.
func MeshSNI(site string) string {
	return fmt.Sprintf("outbound_.%d_._.agent.%s.svc.cluster.local", agent.DefaultPort, site)
}

// ProxyCertName names the certificate of a site's proxy (its sidecar).
func ProxyCertName(site string) string { return "proxy-" + site }

// GatewayCertName names the certificate of a site's east-west gateway.
func GatewayCertName(site string) string { return "gateway-" + site }

const meshTLS = "ssl-min-ver TLSv1.3 ssl-max-ver TLSv1.3"

// proxyConfig is the haproxy configuration of the proxy in sites[i] in
// topology: it reaches site j through the gateway of the next site toward
// j (meshNextGateway).
func (m *MeshGateway) proxyConfig(topology string, sites []*netns.Site, i int, dir string) string {
	var b strings.Builder
	self := sites[i]
	crt := filepath.Join(dir, ProxyCertName(self.Name())+".pem")
	ca := filepath.Join(dir, "ca.pem")
	b.WriteString(hapGlobal)
	fmt.Fprintf(&b, `
# Inbound: mutual TLS from other sites' proxies (through this site's gateway).
frontend inbound
    bind %s ssl crt %s ca-file %s verify required %s
    default_backend service

backend service
    server service %s
`, netip.AddrPortFrom(self.Addr(), MeshInboundPort), crt, ca, meshTLS, hapService)
	for j, peer := range sites {
		if j == i {
			continue
		}
		next, gw := meshNextGateway(topology, sites, i, j)
		fmt.Fprintf(&b, `
# Outbound to the service in site %[1]s: mutual TLS to its proxy, SNI naming the service.
frontend outbound-%[1]s
    bind %[2]s
    default_backend outbound-%[1]s
`, peer.Name(), netip.AddrPortFrom(self.Addr(), uint16(HAProxyLocalBasePort+j)))
		// With sni set, haproxy verifies the server's certificate against it.
		inner := fmt.Sprintf("ssl crt %s ca-file %s verify required sni str(%s) %s",
			crt, ca, MeshSNI(peer.Name()), meshTLS)
		if !m.Double {
			fmt.Fprintf(&b, `
backend outbound-%s
    server gateway %s %s
`, peer.Name(), gw, inner)
			continue
		}
		outer := fmt.Sprintf("ssl crt %s ca-file %s verify required verifyhost %[3]s sni str(%[3]s) %s",
			crt, ca, GatewayCertName(next.Name()), meshTLS)
		fmt.Fprintf(&b, `
backend outbound-%[1]s
    server inner abns@spanperf-outer-%[1]s %[2]s

# Outer layer (ambient): the inner TLS stream, wrapped in mutual TLS to the gateway.
frontend outer-%[1]s
    bind abns@spanperf-outer-%[1]s
    default_backend outer-%[1]s

backend outer-%[1]s
    server gateway %[3]s %[4]s
`, peer.Name(), inner, gw, outer)
	}
	return b.String()
}

// gatewayConfig is the haproxy configuration of the gateway in sites[i] in
// topology: it delivers to its own proxy, and forwards for other sites
// where the topology's paths cross it (meshTransit).
func (m *MeshGateway) gatewayConfig(topology string, sites []*netns.Site, i int, dir string) string {
	self := sites[i]
	rules, backends := m.meshTransit(topology, sites, i, dir)
	bind := netip.AddrPortFrom(self.Addr(), MeshGatewayPort).String()
	if m.Double {
		bind += fmt.Sprintf(" ssl crt %s ca-file %s verify required %s",
			filepath.Join(dir, GatewayCertName(self.Name())+".pem"), filepath.Join(dir, "ca.pem"), meshTLS)
	}
	// Services exposed after setup (discovery) are routed by a map that
	// starts empty and is filled through the runtime API, as Istio's
	// gateway gets routes pushed: server name → the port of the service's
	// proxy on this site's address (a server at 0.0.0.0:0 connects to the
	// destination, whose port set-dst-port changed).
	exposed := meshExposedMap(dir, self.Name())
	global := strings.Replace(hapGlobal, "global\n", fmt.Sprintf("global\n    stats socket %s mode 600 level admin\n", meshGatewaySocket(dir, self.Name())), 1)
	return global + fmt.Sprintf(`
# East-west gateway: route by the SNI of the proxies' TLS, which passes through.
frontend eastwest
    bind %[1]s
    tcp-request inspect-delay 5s
    tcp-request content set-dst-port req_ssl_sni,lower,map_str_int(%[5]s) if { req_ssl_hello_type 1 } { req_ssl_sni,lower,map_str(%[5]s) -m found }
    tcp-request content accept if { req_ssl_hello_type 1 }
    use_backend inbound if { req_ssl_sni -i %[2]s }
%[3]s    use_backend exposed if { req_ssl_sni,lower,map_str(%[5]s) -m found }
    default_backend refuse

backend inbound
    server proxy %[4]s

backend exposed
    server exposed 0.0.0.0:0

backend refuse
    tcp-request content reject
%[6]s`, bind, MeshSNI(self.Name()), rules, netip.AddrPortFrom(self.Addr(), MeshInboundPort), exposed, backends)
}

// Setup makes the run's CA and certificates, then starts every site's
// proxy and gateway.
func (m *MeshGateway) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, pki, err := hapBegin(ctx, meshGatewayName, tb, m.Check)
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
		// haproxy checks a server's certificate against the SNI it sent:
		// the proxy's certificate names the service it fronts.
		if _, err := pki.Issue(ProxyCertName(s.Name()), MeshSNI(s.Name())); err != nil {
			return nil, fmt.Errorf("%s: %w", meshGatewayName, err)
		}
		if _, err := pki.Issue(GatewayCertName(s.Name())); err != nil {
			return nil, fmt.Errorf("%s: %w", meshGatewayName, err)
		}
	}
	topo := TopologyOf(tb)
	for i, s := range sites {
		listen := hapListen(sites, i, MeshInboundPort)
		cfg := filepath.Join(pki.Dir(), "proxy-"+s.Name()+".cfg")
		d, err := hapStart(ctx, meshGatewayName, "proxy", "haproxy-proxy", s, cfg, m.proxyConfig(topo, sites, i, pki.Dir()), listen)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
		if err := pkiWriteEmpty(meshExposedMap(pki.Dir(), s.Name())); err != nil {
			return nil, fmt.Errorf("%s: %w", meshGatewayName, err)
		}
		cfg = filepath.Join(pki.Dir(), "gateway-"+s.Name()+".cfg")
		listen = []netip.AddrPort{netip.AddrPortFrom(s.Addr(), MeshGatewayPort)}
		d, err = hapStart(ctx, meshGatewayName, "gateway", "haproxy-gateway", s, cfg, m.gatewayConfig(topo, sites, i, pki.Dir()), listen)
		if err != nil {
			return nil, err
		}
		daemons = append(daemons, d)
	}
	var expose ExposeFunc
	var redundant RedundantFunc
	x := &meshExposer{m: m, sites: sites, pki: pki}
	if m.CanExpose(topo) == nil {
		expose = x.expose
	}
	if m.CanRouteRedundant(topo) == nil {
		redundant = x.redundant
	}
	link := &Link{
		Target:     AddrTargets(hapTarget(sites)),
		Expose:     expose,
		Redundant:  redundant,
		Components: daemons.Components(),
		Alive:      daemons.Alive,
		Close: func(context.Context) error {
			daemons.Stop(2 * time.Second)
			return pki.Close()
		},
	}
	link.MaxConnections, link.MaxConnectionsBy = hapConnLimit()
	return link, nil
}
