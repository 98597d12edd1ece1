package datapath_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// meshFixture is a mesh-gateway set up between two sites with an echo
// service behind it, and the run's certificates to play the client's proxy.
type meshFixture struct {
	client, server *netns.Site
	gateway        netip.AddrPort
	pool           *x509.CertPool
	proxy          tls.Certificate // the client site's proxy's
	dir            string
}

func setupMesh(t *testing.T, opts map[string]any) *meshFixture {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "mesh-gateway", opts)
	var got []string
	for _, c := range link.Components {
		if c.PID == 0 {
			t.Errorf("component %+v has no pid", c)
		}
		got = append(got, c.Name+"/"+c.Role)
	}
	sort.Strings(got)
	want := []string{"haproxy-gateway@a/gateway", "haproxy-gateway@b/gateway", "haproxy-proxy@a/proxy", "haproxy-proxy@b/proxy"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("components %v, want %v", got, want)
	}
	datapathtest.CarriesAll(t, tb, link)

	sites := tb.LocalSites()
	f := &meshFixture{client: sites[0], server: sites[1], dir: filepath.Join(tb.TempDir(), "mesh-gateway")}
	f.gateway = netip.AddrPortFrom(f.server.Addr(), datapath.MeshGatewayPort)
	f.pool = loadPool(t, filepath.Join(f.dir, "ca.pem"))
	f.proxy = loadCert(t, filepath.Join(f.dir, datapath.ProxyCertName(f.client.Name())+".pem"))
	echoService(t, f.server)
	return f
}

// conf sends the service's SNI, presents certs, and accepts only a chain
// from the run's CA for peer: the SNI names the service, not the peer, as
// in Istio.
func (f *meshFixture) conf(peer string, certs ...tls.Certificate) *tls.Config {
	return presenting(&tls.Config{
		ServerName:         datapath.MeshSNI(f.server.Name()),
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified below, against peer rather than the SNI
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no peer certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: f.pool, Intermediates: inter, DNSName: peer})
			return err
		},
	}, certs...)
}

func TestMeshGateway(t *testing.T) {
	f := setupMesh(t, nil)
	proxy := datapath.ProxyCertName(f.server.Name())

	// Through the gateway, the client's TLS reaches the destination proxy:
	// the gateway passes it through, and holds no certificate to present.
	st, err := tlsEcho(f.client, f.gateway, f.conf(proxy, f.proxy))
	if err != nil {
		t.Fatalf("client proxy through the gateway: %v", err)
	}
	if cn := st.PeerCertificates[0].Subject.CommonName; cn != proxy {
		t.Errorf("peer through the gateway is %q, want the destination proxy %q", cn, proxy)
	}
	cfg, err := os.ReadFile(filepath.Join(f.dir, "gateway-"+f.server.Name()+".cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if bind := regexp.MustCompile(`(?m)^\s*bind .*$`).Find(cfg); bind == nil || strings.Contains(string(bind), "ssl") || strings.Contains(string(bind), "crt") {
		t.Errorf("gateway bind line %q: want plain TCP, no TLS termination", bind)
	}

	err = tlsRefusal(f.client, f.gateway, f.conf(proxy))
	if !isTLSAlert(err) {
		t.Errorf("client without a certificate: %v, want refused by the destination proxy", err)
	}
	t.Logf("client without a certificate: %v", err)
	err = tlsRefusal(f.client, f.gateway, f.conf(proxy, otherCACert(t, datapath.ProxyCertName(f.client.Name()))))
	if !isUnknownCA(err) {
		t.Errorf("client with a certificate from another CA: %v, want refused by the destination proxy", err)
	}
	t.Logf("client with a certificate from another CA: %v", err)

	// The gateway routes only its own site's service.
	c := f.conf(proxy, f.proxy)
	c.ServerName = datapath.MeshSNI("elsewhere")
	err = tlsRefusal(f.client, f.gateway, c)
	if err == nil || isTLSAlert(err) {
		t.Errorf("unknown SNI: %v, want the connection closed before any TLS peer answers", err)
	}
	t.Logf("unknown SNI: %v", err)
}

func TestMeshGatewayDouble(t *testing.T) {
	f := setupMesh(t, map[string]any{"double": true})
	proxy := datapath.ProxyCertName(f.server.Name())
	gateway := datapath.GatewayCertName(f.server.Name())

	// Mutual TLS to the gateway, and inside it mutual TLS to the destination proxy.
	outer, err := tlsClient(f.client, f.gateway, f.conf(gateway, f.proxy))
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	if err := outer.Handshake(); err != nil {
		t.Fatalf("outer layer: %v", err)
	}
	inner, err := echo(tls.Client(outer, f.conf(proxy, f.proxy)))
	if err != nil {
		t.Fatalf("double mutual TLS through the gateway: %v", err)
	}
	if cn := outer.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != gateway {
		t.Errorf("outer peer %q, want the gateway %q", cn, gateway)
	}
	if cn := inner.PeerCertificates[0].Subject.CommonName; cn != proxy {
		t.Errorf("inner peer %q, want the destination proxy %q", cn, proxy)
	}

	err = tlsRefusal(f.client, f.gateway, f.conf(gateway))
	if !isTLSAlert(err) {
		t.Errorf("outer layer without a certificate: %v, want refused by the gateway", err)
	}
	t.Logf("outer layer without a certificate: %v", err)
	err = tlsRefusal(f.client, f.gateway, f.conf(gateway, otherCACert(t, datapath.ProxyCertName(f.client.Name()))))
	if !isUnknownCA(err) {
		t.Errorf("outer layer with a certificate from another CA: %v, want refused by the gateway", err)
	}
	t.Logf("outer layer with a certificate from another CA: %v", err)

	outer, err = tlsClient(f.client, f.gateway, f.conf(gateway, f.proxy))
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Close()
	if err := outer.Handshake(); err != nil {
		t.Fatalf("outer layer: %v", err)
	}
	err = refusal(tls.Client(outer, f.conf(proxy)))
	if !isTLSAlert(err) {
		t.Errorf("inner layer without a certificate: %v, want refused by the destination proxy", err)
	}
	t.Logf("inner layer without a certificate: %v", err)
}

func TestMeshGatewayTeardown(t *testing.T) {
	for _, double := range []bool{false, true} {
		t.Run(map[bool]string{false: "sidecar", true: "double"}[double], func(t *testing.T) {
			checkTeardown(t, "mesh-gateway", map[string]any{"double": double})
		})
	}
}
