package datapath_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func TestMTLSRelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    map[string]any
		version uint16
		cipher  uint16
	}{
		{"tls1.3", nil, tls.VersionTLS13, 0},
		{"tls1.2", map[string]any{"tls_version": "1.2", "ciphers": "ECDHE-ECDSA-AES128-GCM-SHA256"},
			tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, "mtls-relay", tc.opts)
			if n := len(link.Components); n != 2 {
				t.Errorf("%d components, want a relay per site: %+v", n, link.Components)
			}
			for _, c := range link.Components {
				if c.Role != "relay" || c.PID == 0 || !strings.HasPrefix(c.Name, "haproxy@") {
					t.Errorf("component %+v, want haproxy@<site> with role relay and a pid", c)
				}
			}
			sites := tb.LocalSites()
			client, server := sites[0], sites[1]
			if got, want := datapathtest.AddrOf(t, link.Target(client, server, agent.DefaultPort)), netip.AddrPortFrom(client.Addr(), datapath.HAProxyLocalBasePort+1); got != want {
				t.Errorf("target %s, want the relay in the client's site, %s", got, want)
			}
			datapathtest.CarriesAll(t, tb, link)
			// HAProxy's maxconn: half the hard descriptor limit, capped.
			var lim unix.Rlimit
			unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
			if want := min(65536, (int(lim.Max)-200)/2); lim.Max <= 1<<20 && (link.MaxConnections != want || !strings.Contains(link.MaxConnectionsBy, "maxconn")) {
				t.Errorf("max connections %d (%q), want %d: HAProxy's maxconn under the hard limit %d", link.MaxConnections, link.MaxConnectionsBy, want, lim.Max)
			}

			// Play a relay of site a towards site b's relay, which delivers to
			// an echo service, with certificates good, missing, or from another CA.
			echoService(t, server)
			dir := filepath.Join(tb.TempDir(), "mtls-relay")
			pool := loadPool(t, filepath.Join(dir, "ca.pem"))
			good := loadCert(t, filepath.Join(dir, datapath.RelayCertName(client.Name())+".pem"))
			rogue := otherCACert(t, datapath.RelayCertName(client.Name()))
			far := netip.AddrPortFrom(server.Addr(), datapath.MTLSRelayPort)
			conf := func(certs ...tls.Certificate) *tls.Config {
				return presenting(&tls.Config{RootCAs: pool, ServerName: datapath.RelayCertName(server.Name())}, certs...)
			}

			st, err := tlsEcho(client, far, conf(good))
			if err != nil {
				t.Fatalf("relay with the run's certificate: %v", err)
			}
			if st.Version != tc.version {
				t.Errorf("TLS version %s, want %s", tls.VersionName(st.Version), tls.VersionName(tc.version))
			}
			if tc.cipher != 0 && st.CipherSuite != tc.cipher {
				t.Errorf("cipher suite %s, want %s", tls.CipherSuiteName(st.CipherSuite), tls.CipherSuiteName(tc.cipher))
			}
			err = tlsRefusal(client, far, conf())
			if !isTLSAlert(err) {
				t.Errorf("client without a certificate: %v, want refused with a TLS alert", err)
			}
			t.Logf("client without a certificate: %v", err)
			err = tlsRefusal(client, far, conf(rogue))
			if !isUnknownCA(err) {
				t.Errorf("relay with a certificate from another CA: %v, want refused with a TLS alert", err)
			}
			t.Logf("relay with a certificate from another CA: %v", err)
		})
	}
}

func TestMTLSRelayOptions(t *testing.T) {
	info := datapath.MTLSRelayInfo()
	for _, tc := range []struct {
		opts map[string]any
		ok   bool
	}{
		{map[string]any{"tls_version": "1.3", "ciphers": ""}, true},
		{map[string]any{"tls_version": "1.3", "ciphers": "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"}, true},
		{map[string]any{"tls_version": "1.2", "ciphers": "ECDHE-ECDSA-AES128-GCM-SHA256:!aNULL"}, true},
		{map[string]any{"tls_version": "1.1", "ciphers": ""}, false},
		{map[string]any{"tls_version": "1.3", "ciphers": "X\n    bind 0.0.0.0:1"}, false},
		{map[string]any{"tls_version": "1.3", "ciphers": "A B"}, false},
	} {
		_, err := info.New(tc.opts)
		if (err == nil) != tc.ok {
			t.Errorf("New(%v): %v, want ok=%v", tc.opts, err, tc.ok)
		}
	}
}

func TestMTLSRelayTeardown(t *testing.T) { checkTeardown(t, "mtls-relay", nil) }

// checkTeardown sets up datapath name, checks its daemons run and its
// secrets are private, closes the link, and checks that no haproxy of the
// run and none of its files remain; after the testbed closes, that nothing
// of the run remains in the temp dir.
func checkTeardown(t *testing.T, name string, opts map[string]any) {
	dp := datapathtest.New(t, name, opts)
	var tmp string
	t.Cleanup(func() { // runs after the testbed's Close, registered below
		if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("testbed temp dir %s after close: %v", tmp, err)
		}
	})
	tb := datapathtest.Testbed(t, netns.Spec{})
	tmp = tb.TempDir()
	link, err := dp.Setup(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, name)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v, want a 0700 directory", dir, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	keys := 0
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", f, err, fi.Mode().Perm())
		}
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("PRIVATE KEY")) {
			keys++
		}
	}
	if keys == 0 {
		t.Errorf("no key files in %s: %v", dir, files)
	}
	running := haproxyOf(tmp)
	if len(running) != len(link.Components) {
		t.Errorf("haproxy processes of the run %v, components %+v", running, link.Components)
	}
	for _, c := range link.Components {
		if !running[c.PID] {
			t.Errorf("component %s (pid %d) is not a haproxy of the run", c.Name, c.PID)
		}
	}
	if err := link.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := haproxyOf(tmp); len(left) > 0 {
		t.Errorf("haproxy left running after Close: %v", left)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		t.Errorf("%s after Close: %v %v", dir, err, files)
	}
}

// haproxyOf returns the PIDs of haproxy processes whose command line names
// a file under dir.
func haproxyOf(dir string) map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if strings.HasSuffix(args[0], "haproxy") && bytes.Contains(cmd, []byte(dir+"/")) {
			out[pid] = true
		}
	}
	return out
}

// echoService listens on the service port on loopback in site, echoing
// whatever it reads, until the test ends.
func echoService(t *testing.T, site *netns.Site) {
	t.Helper()
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), agent.DefaultPort)
	datapathtest.Listen(t, site, addr, func(c net.Conn) { defer c.Close(); io.Copy(c, c) })
}

// dialIn opens a TCP connection from inside site.
func dialIn(site *netns.Site, to netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := site.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", to.String(), 5*time.Second)
		return err
	})
	return c, err
}

// tlsClient opens a TCP connection from inside site to addr, for TLS with
// conf; the handshake happens on first use. Close closes the TCP connection.
func tlsClient(site *netns.Site, addr netip.AddrPort, conf *tls.Config) (*tls.Conn, error) {
	raw, err := dialIn(site, addr)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	return tls.Client(raw, conf), nil
}

// tlsEcho opens TLS from site to addr with conf, sends a line and expects it
// back (from echoService behind the relays), returning the TLS state.
func tlsEcho(site *netns.Site, addr netip.AddrPort, conf *tls.Config) (tls.ConnectionState, error) {
	c, err := tlsClient(site, addr, conf)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return echo(c)
}

// tlsRefusal opens TLS from site to addr with conf and returns how the
// server answered: nil if it sent data, else the error.
func tlsRefusal(site *netns.Site, addr netip.AddrPort, conf *tls.Config) error {
	c, err := tlsClient(site, addr, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	return refusal(c)
}

// refusal completes c's handshake and reads, writing nothing: in TLS 1.3 a
// server judges the client's certificate after the client has finished its
// handshake, and a refusal arrives as an alert on read (writing first could
// meet the server's reset instead).
func refusal(c *tls.Conn) error {
	if err := c.Handshake(); err != nil {
		return err
	}
	_, err := c.Read(make([]byte, 1))
	return err
}

// echo completes c's handshake and checks a line comes back through it.
func echo(c *tls.Conn) (tls.ConnectionState, error) {
	if err := c.Handshake(); err != nil {
		return tls.ConnectionState{}, err
	}
	msg := []byte("ping through the relays\n")
	if _, err := c.Write(msg); err != nil {
		return c.ConnectionState(), err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return c.ConnectionState(), err
	}
	if !bytes.Equal(got, msg) {
		return c.ConnectionState(), fmt.Errorf("echo %q, want %q", got, msg)
	}
	return c.ConnectionState(), nil
}

// presenting makes conf present certs[0] (or no certificate) as client
// certificate whatever CAs the server asks for: crypto/tls would otherwise
// send none rather than one from a CA the server did not name.
func presenting(conf *tls.Config, certs ...tls.Certificate) *tls.Config {
	conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if len(certs) == 0 {
			return &tls.Certificate{}, nil
		}
		return &certs[0], nil
	}
	return conf
}

// isTLSAlert says whether err is an alert sent by the TLS peer: a refusal,
// not a lost connection.
func isTLSAlert(err error) bool {
	return err != nil && strings.Contains(err.Error(), "remote error: tls:")
}

// isUnknownCA says whether err is the alert a TLS peer sends on a
// certificate it received and rejected.
func isUnknownCA(err error) bool {
	return isTLSAlert(err) && (strings.Contains(err.Error(), "unknown certificate authority") || strings.Contains(err.Error(), "bad certificate"))
}

func loadPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s: no certificate", file)
	}
	return pool
}

func loadCert(t *testing.T, file string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(file, file)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// otherCACert issues a certificate named name from a CA that is not the run's.
func otherCACert(t *testing.T, name string) tls.Certificate {
	t.Helper()
	p, err := pki.New(filepath.Join(t.TempDir(), "rogue"), "rogue CA")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := p.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	return c.TLS
}
