package datapath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var _ Exposer = (*MeshGateway)(nil)

// Ports of the services mesh-gateway exposes after setup, exposure k on
// each site's underlay address.
const (
	// MeshExposeInboundPort + k: the new service's proxy (its sidecar) in
	// its site terminates mutual TLS and delivers to the service.
	MeshExposeInboundPort = 19000
	// MeshExposeLocalPort + k: a client site's outbound listener for the
	// new service.
	MeshExposeLocalPort = 19500
	meshExposePorts     = 500
)

// CanExpose: mesh-gateway exposes a service with a proxy of its own in
// its site, a route by its server name in that site's gateway (the
// runtime API's map, no reload) and an outbound listener in every other
// site, in the mesh only: in the hub and the chain the route would have
// to be pushed to every gateway on the way.
func (m *MeshGateway) CanExpose(topology string) error {
	if topology == testbed.TopologyHub || topology == testbed.TopologyChain {
		return fmt.Errorf("in topology %s: its exposures are routed by the server site's gateway only, not the gateways in the middle", topology)
	}
	return nil
}

// MeshExposeSNI is the server name of exposure k, a service in site:
// Istio's outbound cluster name of a new service.
func MeshExposeSNI(site string, k, port int) string {
	return fmt.Sprintf("outbound_.%d_._.svc-%d.%s.svc.cluster.local", port, k, site)
}

// meshExposedMap is the map file of site's gateway (empty: routes come
// through the runtime API); meshGatewaySocket its runtime API socket.
func meshExposedMap(dir, site string) string { return filepath.Join(dir, "exposed-"+site+".map") }

func meshGatewaySocket(dir, site string) string { return filepath.Join(dir, "gateway-"+site+".sock") }

// pkiWriteEmpty creates an empty file readable by its owner only.
func pkiWriteEmpty(path string) error { return pki.WriteSecret(path, nil) }

// meshExposer exposes services through a mesh-gateway set up on a
// testbed; each exposure runs its proxies as haproxy processes of their
// own ("haproxy-expose"), as a new pod brings its own sidecar.
type meshExposer struct {
	m     *MeshGateway
	sites []*netns.Site
	pki   *pki.CA
}

// inboundConfig is the new service's proxy in site j: mutual TLS in, with
// a certificate for the service's server name, delivered on loopback.
func (x *meshExposer) inboundConfig(j, k, port int, crt string) string {
	return hapGlobal + fmt.Sprintf(`
# Exposure %[1]d: the new service's proxy, behind this site's gateway.
frontend expose-in-%[1]d
    bind %[2]s ssl crt %[3]s ca-file %[4]s verify required %[5]s
    default_backend expose-service-%[1]d

backend expose-service-%[1]d
    retries 0
    server service 127.0.0.1:%[6]d
`, k, netip.AddrPortFrom(x.sites[j].Addr(), uint16(MeshExposeInboundPort+k)), crt, x.pki.CAFile(), meshTLS, port)
}

// outboundConfig is site i's outbound listener for exposure k of a
// service in the sites to: mutual TLS to the service's proxy through the
// gateway of its site (wrapped in mutual TLS to the gateway itself with
// Double), as proxyConfig does for the sites' own services. With several
// sites (failover, sidecar mode only) the first is preferred and the others
// are backups, each health-checked end to end, as Istio's locality
// failover moves a sidecar's traffic when a cluster's endpoints fail.
func (x *meshExposer) outboundConfig(i int, to []int, k, port int) string {
	self := x.sites[i]
	crt := filepath.Join(x.pki.Dir(), ProxyCertName(self.Name())+".pem")
	ca := x.pki.CAFile()
	var b strings.Builder
	b.WriteString(hapGlobal)
	fmt.Fprintf(&b, `
# Exposure %[1]d: clients in this site, to the new service.
frontend expose-out-%[1]d
    bind %[2]s
    default_backend expose-out-%[1]d

backend expose-out-%[1]d
`, k, netip.AddrPortFrom(self.Addr(), uint16(MeshExposeLocalPort+k)))
	if x.m.Double {
		peer := x.sites[to[0]]
		gw := netip.AddrPortFrom(peer.Addr(), MeshGatewayPort)
		inner := fmt.Sprintf("ssl crt %s ca-file %s verify required sni str(%s) %s", crt, ca, MeshExposeSNI(peer.Name(), k, port), meshTLS)
		outer := fmt.Sprintf("ssl crt %s ca-file %s verify required verifyhost %[3]s sni str(%[3]s) %s", crt, ca, GatewayCertName(peer.Name()), meshTLS)
		fmt.Fprintf(&b, `    server inner abns@spanperf-expose-outer-%[1]d %[2]s

# Outer layer (ambient): the inner TLS stream, wrapped in mutual TLS to the gateway.
frontend expose-outer-%[1]d
    bind abns@spanperf-expose-outer-%[1]d
    default_backend expose-outer-%[1]d

backend expose-outer-%[1]d
    server gateway %[3]s %[4]s
`, k, inner, gw, outer)
		return b.String()
	}
	check := ""
	if len(to) > 1 {
		var opts string
		opts, check = hapHealthCheck()
		b.WriteString(opts)
	}
	for n, j := range to {
		peer := x.sites[j]
		sni := MeshExposeSNI(peer.Name(), k, port)
		backup, checkSSL := "", ""
		if n > 0 {
			backup = " backup"
		}
		if check != "" {
			checkSSL = " check-ssl check-sni " + sni
		}
		fmt.Fprintf(&b, "    server gateway-%s %s ssl crt %s ca-file %s verify required verifyhost %[5]s sni str(%[5]s) %s%s%s%s\n",
			peer.Name(), netip.AddrPortFrom(peer.Addr(), MeshGatewayPort), crt, ca, sni, meshTLS, check, checkSSL, backup)
	}
	return b.String()
}

// runtime sends one command to the runtime API of site's gateway and
// returns an error with its answer unless the answer is empty.
func (x *meshExposer) runtime(site, command string) error {
	c, err := net.DialTimeout("unix", meshGatewaySocket(x.pki.Dir(), site), 2*time.Second)
	if err != nil {
		return fmt.Errorf("%s: runtime API of the gateway on site %s: %w", meshGatewayName, site, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, command+"\n"); err != nil {
		return fmt.Errorf("%s: runtime API of the gateway on site %s: %w", meshGatewayName, site, err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return fmt.Errorf("%s: runtime API of the gateway on site %s: %w", meshGatewayName, site, err)
	}
	if a := strings.TrimSpace(string(out)); a != "" {
		return fmt.Errorf("%s: gateway on site %s: %q: %s", meshGatewayName, site, command, a)
	}
	return nil
}

// CanRouteRedundant: mesh-gateway routes a client's sidecar to the
// service in two sites, through each site's gateway, the first preferred
// and health-checked (Istio's locality failover), in the mesh and in
// sidecar mode: with Double the checks would have to cross the outer layer
// too.
func (m *MeshGateway) CanRouteRedundant(topology string) error {
	if m.Double {
		return errors.New("with double: its health checks do not cross the outer layer (use sidecar mode)")
	}
	return m.CanExpose(topology)
}

var _ Redundancer = (*MeshGateway)(nil)

// expose routes every other site to the service in site to.
func (x *meshExposer) expose(ctx context.Context, to testbed.Site, port int) (*Exposure, error) {
	j, err := siteIndex(meshGatewayName, x.sites, to)
	if err != nil {
		return nil, err
	}
	var clients []int
	for i := range x.sites {
		if i != j {
			clients = append(clients, i)
		}
	}
	return x.route(ctx, clients, []int{j}, port)
}

// redundant routes site from to the service in the sites to, the first
// preferred.
func (x *meshExposer) redundant(ctx context.Context, from testbed.Site, to []testbed.Site, port int) (*Exposure, error) {
	i, servers, err := redundantSites(meshGatewayName, x.sites, from, to)
	if err != nil {
		return nil, err
	}
	return x.route(ctx, []int{i}, servers, port)
}

// route issues the new service's certificate in each server site, then at
// once starts its proxy there and adds its route to that site's gateway,
// and starts an outbound listener to the servers in every client site.
func (x *meshExposer) route(ctx context.Context, clients, servers []int, port int) (_ *Exposure, err error) {
	k := int(exposeSeq.Add(1) % meshExposePorts)
	var files []string
	var ds Daemons
	var routed []int
	undo := func() error {
		ds.Stop(2 * time.Second)
		var errs []error
		for _, j := range routed {
			name := x.sites[j].Name()
			errs = append(errs, x.runtime(name, fmt.Sprintf("del map %s %s", meshExposedMap(x.pki.Dir(), name), MeshExposeSNI(name, k, port))))
		}
		for _, f := range files {
			errs = append(errs, rmFile(f))
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	crts := map[int]string{}
	for _, j := range servers {
		name := x.sites[j].Name()
		crt, err := x.pki.Issue(fmt.Sprintf("proxy-%s-svc-%d", name, k), MeshExposeSNI(name, k, port))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", meshGatewayName, err)
		}
		files = append(files, crt.File)
		crts[j] = crt.File
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := func(i int, cfg string, listen uint16) {
		defer wg.Done()
		s := x.sites[i]
		path := filepath.Join(x.pki.Dir(), fmt.Sprintf("expose-%d-%s.cfg", k, s.Name()))
		d, err := hapStartFast(ctx, meshGatewayName, "proxy", s, path, cfg, netip.AddrPortFrom(s.Addr(), listen))
		mu.Lock()
		defer mu.Unlock()
		files = append(files, path)
		if err != nil {
			errs = append(errs, err)
			return
		}
		ds = append(ds, d)
	}
	for _, j := range servers {
		wg.Add(1)
		go start(j, x.inboundConfig(j, k, port, crts[j]), uint16(MeshExposeInboundPort+k))
	}
	for _, i := range clients {
		wg.Add(1)
		go start(i, x.outboundConfig(i, servers, k, port), uint16(MeshExposeLocalPort+k))
	}
	for _, j := range servers {
		name := x.sites[j].Name()
		if err := x.runtime(name, fmt.Sprintf("add map %s %s %d", meshExposedMap(x.pki.Dir(), name), MeshExposeSNI(name, k, port), MeshExposeInboundPort+k)); err != nil {
			errs = append(errs, err)
			continue
		}
		routed = append(routed, j)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	serves := map[string]bool{}
	for _, j := range servers {
		serves[x.sites[j].Name()] = true
	}
	done := false
	return &Exposure{
		Target: func(from testbed.Site) testbed.Target {
			if serves[from.Name()] {
				return testbed.AddrTarget(netip.AddrPortFrom(siteAddr(from), uint16(port)))
			}
			return testbed.AddrTarget(netip.AddrPortFrom(siteAddr(from), uint16(MeshExposeLocalPort+k)))
		},
		Undo: func(context.Context) error {
			if done {
				return nil
			}
			done = true
			return undo()
		},
	}, nil
}
