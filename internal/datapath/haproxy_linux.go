package datapath

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// Ports of the HAProxy-based datapaths, on each site's underlay address.
const (
	// HAProxyLocalBasePort + j is where the relay or proxy of a site listens, in
	// plain TCP, for clients of the service in site j (0-based).
	HAProxyLocalBasePort = 17100
	// MTLSRelayPort is where each mtls-relay relay accepts mutual TLS from the
	// relays of other sites.
	MTLSRelayPort = 17443
	// MeshGatewayPort is where each mesh-gateway east-west gateway listens.
	MeshGatewayPort = 15443
	// MeshInboundPort is where each mesh-gateway proxy terminates mutual
	// TLS for its site's service.
	MeshInboundPort = 15006
)

// haproxyStartTimeout bounds a haproxy's start; the machine may be busy.
const haproxyStartTimeout = 15 * time.Second

// hapCheck says whether haproxy, built with OpenSSL, is installed.
func hapCheck(ctx context.Context, dp string) error {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		return notSupported("%s: haproxy not found in PATH (Debian package haproxy)", dp)
	}
	out, err := exec.CommandContext(ctx, path, "-vv").Output()
	if err != nil {
		return fmt.Errorf("%s: haproxy -vv: %w", dp, err)
	}
	if !bytes.Contains(out, []byte("OpenSSL")) {
		return notSupported("%s: %s is built without OpenSSL (Debian package haproxy has it)", dp, path)
	}
	return nil
}

// hapBegin starts the Setup of an HAProxy datapath dp: it needs the local
// testbed with at least 2 sites and what check asks for, and it makes the
// run's CA under the testbed's temp dir. The caller closes the CA when its
// Setup fails.
func hapBegin(ctx context.Context, dp string, tb testbed.Testbed, check func(context.Context) error) (*netns.Testbed, *pki.CA, error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, nil, notSupported("%s: needs the local network-namespace testbed", dp)
	}
	if n := len(ltb.LocalSites()); n < 2 {
		return nil, nil, fmt.Errorf("%s: needs at least 2 sites, the testbed has %d", dp, n)
	}
	if err := check(ctx); err != nil {
		return nil, nil, err
	}
	ca, err := pki.New(filepath.Join(ltb.TempDir(), dp), "spanperf "+dp+" CA")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dp, err)
	}
	return ltb, ca, nil
}

// hapListen is what site i's front haproxy listens on: inbound from the
// other sites' relays or proxies, and one local port per other site j
// (HAProxyLocalBasePort + j) for clients in site i.
func hapListen(sites []*netns.Site, i int, inbound uint16) []netip.AddrPort {
	s := sites[i]
	listen := []netip.AddrPort{netip.AddrPortFrom(s.Addr(), inbound)}
	for j := range sites {
		if j != i {
			listen = append(listen, netip.AddrPortFrom(s.Addr(), uint16(HAProxyLocalBasePort+j)))
		}
	}
	return listen
}

// hapTarget is the Link.Target of datapaths whose local relay or proxy
// in each site listens on HAProxyLocalBasePort + j for site j. The relays forward
// to the service port (agent.DefaultPort) only, whatever port is asked; a
// client in the server's own site dials the service directly.
func hapTarget(sites []*netns.Site) func(from, to testbed.Site, port int) netip.AddrPort {
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
	}
	return func(from, to testbed.Site, port int) netip.AddrPort {
		if from.Name() == to.Name() {
			return netip.AddrPortFrom(siteAddr(to), uint16(port))
		}
		return netip.AddrPortFrom(siteAddr(from), uint16(HAProxyLocalBasePort+index[to.Name()]))
	}
}

// hapService is where a site's relay or proxy delivers: the service on loopback.
var hapService = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), agent.DefaultPort)

// hapGlobal is the head of every config: TCP proxying, long idle timeouts
// (a trial's connections may idle between phases), and as many connections
// as the descriptor limit allows (haproxy needs two descriptors per
// connection and, without CAP_SYS_RESOURCE, cannot raise the hard limit).
var hapGlobal = fmt.Sprintf(`global
    maxconn %d
    ssl-server-verify required

defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
`, hapMaxConn())

// hapMaxConnCap bounds haproxy's maxconn where the descriptor limit is
// higher: room for 16,000 connections and more (the connections workload),
// without descriptor tables sized for a million.
const hapMaxConnCap = 65536

func hapMaxConn() int {
	n, _ := hapConnLimit()
	return n
}

// hapConnLimit is the maxconn of every haproxy of the HAProxy datapaths
// (the most connections at once each carries) and what sets it, for
// Link.MaxConnections.
func hapConnLimit() (int, string) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Max > 1<<20 {
		return 10000, "HAProxy's maxconn 10000 (spanperf's choice where the descriptor limit is unknown or unlimited)"
	}
	n := (int(lim.Max) - 200) / 2
	switch {
	case n < 100:
		return 100, "HAProxy's maxconn 100 (spanperf's least)"
	case n > hapMaxConnCap:
		return hapMaxConnCap, fmt.Sprintf("HAProxy's maxconn %d (spanperf's cap)", hapMaxConnCap)
	}
	return n, fmt.Sprintf("HAProxy's maxconn %d: two descriptors per connection under RLIMIT_NOFILE's hard limit %d, which only CAP_SYS_RESOURCE raises", n, lim.Max)
}

// hapStart writes cfg to path (mode 0600) and runs `haproxy -db -f path`
// in site, ready once every address in listen is listening there.
func hapStart(ctx context.Context, dp, role, name string, site *netns.Site, path, cfg string, listen []netip.AddrPort) (*Daemon, error) {
	if err := pki.WriteSecret(path, []byte(cfg)); err != nil {
		return nil, fmt.Errorf("%s: config for %s on site %s: %w", dp, name, site.Name(), err)
	}
	cmd := testbed.Command{Name: name, Path: "haproxy", Args: []string{"-db", "-f", path}}
	return StartDaemon(ctx, dp, role, site, cmd, func() error {
		return site.Do(func() error { return hapListening(listen) })
	}, haproxyStartTimeout)
}

// hapListening returns nil when every address in want is a listening TCP socket
// in the calling thread's network namespace. Reading the socket table, unlike
// dialing, makes a relay open no onward connection.
func hapListening(want []netip.AddrPort) error {
	f, err := os.Open("/proc/thread-self/net/tcp")
	if err != nil {
		return err
	}
	defer f.Close()
	have := map[netip.AddrPort]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[3] != "0A" { // TCP_LISTEN
			continue
		}
		if ap, ok := hapParseAddr(fs[1]); ok {
			have[ap] = true
		}
	}
	for _, ap := range want {
		if !have[ap] {
			return fmt.Errorf("not listening on %s", ap)
		}
	}
	return nil
}

// hapParseAddr parses an IPv4 "0100007F:1BBC" of /proc/net/tcp (the address
// in host byte order, the port in hex).
func hapParseAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(a) != 8 {
		return netip.AddrPort{}, false
	}
	b, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var ip [4]byte
	binary.NativeEndian.PutUint32(ip[:], binary.BigEndian.Uint32(b))
	return netip.AddrPortFrom(netip.AddrFrom4(ip), uint16(port)), true
}

// hapCiphers accepts OpenSSL cipher and TLS 1.3 ciphersuite strings.
var hapCiphers = regexp.MustCompile(`^[A-Za-z0-9_:+!@=.-]*$`)
