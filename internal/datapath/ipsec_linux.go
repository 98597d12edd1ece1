package datapath

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// IPsec joins every pair of sites with strongSwan IKEv2 (one charon per
// site, configured through swanctl), authenticated by a pre-shared key made
// for the run or by certificates from a CA made for the run.
// ESP runs in the kernel where it has ESP, else in charon itself
// (kernel-libipsec: a TUN device and ESP in UDP). In tunnel mode each site
// gets an inner address 198.19.2.(i+1)/32 on its loopback and clients dial
// the server's inner address; in transport mode (kernel ESP only) they dial
// its underlay address. In the gateway topology (tunnel mode only) each
// pair's traffic selectors also hold the subnets behind both sites.
// With Implementation libreswan, one pluto per site does the same in
// tunnel mode over kernel ESP (see ipsec_libreswan_linux.go).
type IPsec struct {
	// Proposal is the ESP proposal: aes128gcm16, aes256gcm16 or
	// chacha20poly1305.
	Proposal string
	// Mode is "tunnel" or "transport".
	Mode string
	// ESP says where ESP runs: "kernel", "libipsec" (in charon, over TUN)
	// or "auto" (the kernel when it has ESP, else libipsec).
	ESP string
	// Auth is how the peers authenticate: "psk" (a pre-shared key made for
	// the run) or "cert" (ECDSA P-256 certificates from a CA made for the
	// run; each site's identity is its name).
	Auth string
	// Implementation is the IKE daemon: IPsecStrongSwan (charon) or
	// IPsecLibreswan (pluto; tunnel mode, kernel ESP only).
	Implementation string

	// Test hooks (see ipsec_export_test.go).
	wrongPSK       string // site whose PSK (or CA, with cert) differs from every other site's
	ignoreSAErrors bool   // Setup goes on when an SA does not come up
	brokenConf     bool   // charon's strongswan.conf does not parse
}

var (
	_ Exposer        = (*IPsec)(nil)
	_ Datapath       = (*IPsec)(nil)
	_ Checker        = (*IPsec)(nil)
	_ GatewayChecker = (*IPsec)(nil)
)

// Choices of the ipsec options.
var (
	ipsecProposals = []string{"aes128gcm16", "aes256gcm16", "chacha20poly1305"}
	ipsecModes     = []string{"tunnel", "transport"}
	ipsecESP       = []string{"auto", "kernel", "libipsec"}
	ipsecAuth      = []string{"psk", "cert"}
)

// IPsecInfo registers IPsec.
func IPsecInfo() Info {
	return Info{
		Name:    "ipsec",
		Summary: "strongSwan (or libreswan) IKEv2 with a per-run PSK or certificates; ESP in the kernel or in charon (kernel-libipsec over TUN)",
		Options: []scenario.Field{
			{Name: "proposal", Kind: scenario.KindString, Doc: "ESP proposal", Default: "aes128gcm16", Enum: ipsecProposals},
			{Name: "mode", Kind: scenario.KindString, Doc: "IPsec mode (transport needs kernel ESP)", Default: "tunnel", Enum: ipsecModes},
			{Name: "esp", Kind: scenario.KindString, Doc: "where ESP runs: kernel, libipsec (userspace, over TUN) or auto (kernel if it has ESP)", Default: "auto", Enum: ipsecESP},
			{Name: "auth", Kind: scenario.KindString, Doc: "peer authentication: psk (a per-run pre-shared key) or cert (per-run CA, ECDSA P-256 certificates)", Default: "psk", Enum: ipsecAuth},
			{Name: "implementation", Kind: scenario.KindString, Doc: "IKE daemon: strongswan (charon) or libreswan (pluto, Debian package libreswan; tunnel mode, needs kernel ESP)", Default: IPsecStrongSwan, Enum: ipsecImplementations},
		},
		Doctor:       []map[string]any{{"implementation": IPsecLibreswan}},
		Components:   ipsecComponents,
		CheckOptions: ipsecCheckOptions,
		New:          func(o map[string]any) (Datapath, error) { return newIPsec(o) },
	}
}

func newIPsec(o map[string]any) (*IPsec, error) {
	str := func(name, def string) string {
		if s, ok := o[name].(string); ok && s != "" {
			return s
		}
		return def
	}
	p := &IPsec{Proposal: str("proposal", "aes128gcm16"), Mode: str("mode", "tunnel"), ESP: str("esp", "auto"), Auth: str("auth", "psk"), Implementation: str("implementation", IPsecStrongSwan)}
	return p, p.Validate()
}

// Validate reports options that can never work, on any machine.
func (p *IPsec) Validate() error {
	for _, c := range []struct {
		name, v string
		ok      []string
	}{{"proposal", p.Proposal, ipsecProposals}, {"mode", p.Mode, ipsecModes}, {"esp", p.ESP, ipsecESP}, {"auth", p.Auth, ipsecAuth}, {"implementation", p.Implementation, ipsecImplementations}} {
		if !slices.Contains(c.ok, c.v) {
			return fmt.Errorf("ipsec: %s %q (want one of %s)", c.name, c.v, strings.Join(c.ok, ", "))
		}
	}
	_, err := p.combination()
	return err
}

// CheckGateway accepts the gateway topology in tunnel mode, whose traffic
// selectors can hold the subnets behind the gateways; transport mode
// protects only the gateways' own traffic.
func (p *IPsec) CheckGateway() error {
	if p.Implementation == IPsecLibreswan {
		return errors.New("ipsec implementation libreswan: the gateway topology is not built (its subnets behind need leftsubnets= conns that were never exercised here: libreswan cannot run on this machine)")
	}
	if p.Mode == "transport" {
		return errors.New("ipsec transport mode protects only the gateways' own traffic (use mode: tunnel)")
	}
	return nil
}

// ipsecTools are the programs and the ESP flavour a Setup uses, as found by Check.
type ipsecTools struct {
	charon, swanctl, unshare, sh string
	libipsec                     bool // ESP in charon (kernel-libipsec), not the kernel
}

// charonPaths are where distributions put charon.
var charonPaths = []string{"/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon", "/usr/lib/strongswan/charon", "/usr/libexec/strongswan/charon"}

// Check looks for charon, swanctl, the strongSwan plugins the options need,
// unshare, and decides where ESP runs: it tries to add an xfrm state in a
// scratch namespace.
func (p *IPsec) Check(ctx context.Context) error {
	if p.Implementation == IPsecLibreswan {
		_, err := p.libreswanTools()
		return err
	}
	_, err := p.tools(ctx)
	return err
}

func (p *IPsec) tools(context.Context) (*ipsecTools, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &ipsecTools{}
	for _, c := range charonPaths {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			t.charon = c
			break
		}
	}
	if t.charon == "" {
		return nil, notSupported("ipsec: no strongSwan charon in %s (Debian package strongswan-charon)", strings.Join(charonPaths, ", "))
	}
	for _, prog := range []struct {
		dst       *string
		name, pkg string
	}{{&t.swanctl, "swanctl", "strongswan-swanctl"}, {&t.unshare, "unshare", "util-linux"}, {&t.sh, "sh", "dash"}} {
		path, err := exec.LookPath(prog.name)
		if err != nil {
			return nil, notSupported("ipsec: no %s (Debian package %s)", prog.name, prog.pkg)
		}
		*prog.dst = path
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return nil, notSupported("ipsec: no mount (Debian package mount)")
	}
	refused, err := kernelESP()
	if err != nil {
		return nil, err
	}
	kernelESP := refused == nil
	switch {
	case p.ESP == "kernel" && !kernelESP:
		return nil, notSupported("ipsec: esp kernel: %s (adding an xfrm state: %v)", kernelLacksESP, refused)
	case p.Mode == "transport" && !kernelESP:
		return nil, notSupported("ipsec: transport mode needs kernel ESP (kernel-libipsec carries tunnel mode only): %s (adding an xfrm state: %v)", kernelLacksESP, refused)
	}
	t.libipsec = p.ESP == "libipsec" || (p.ESP == "auto" && !kernelESP)
	plugins := filepath.Join(filepath.Dir(t.charon), "plugins")
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(plugins, "libstrongswan-"+name+".so"))
		return err == nil
	}
	need := []struct{ plugins, what, pkg string }{
		{"vici", "the vici plugin", "strongswan-libcharon"},
		{"kernel-netlink", "the kernel-netlink plugin", "strongswan-libcharon"},
		{"socket-default", "the socket-default plugin", "strongswan-libcharon"},
		{"openssl", "the openssl plugin (IKE and ESP crypto: ECP, AES-GCM, ChaCha20-Poly1305)", "libstrongswan-standard-plugins"},
	}
	if t.libipsec {
		need = append(need, struct{ plugins, what, pkg string }{"kernel-libipsec", "the kernel-libipsec plugin (this kernel lacks ESP or esp: libipsec was asked)", "libcharon-extra-plugins"})
	}
	for _, n := range need {
		if !has(n.plugins) {
			return nil, notSupported("ipsec: strongSwan lacks %s in %s (Debian package %s)", n.what, plugins, n.pkg)
		}
	}
	if t.libipsec {
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			return nil, notSupported("ipsec: kernel-libipsec needs /dev/net/tun (CONFIG_TUN): %v", err)
		}
	}
	return t, nil
}

// kernelLacksESP says what a kernel without ESP lacks and what provides it.
const kernelLacksESP = "this kernel lacks ESP: it needs CONFIG_XFRM, CONFIG_XFRM_USER and CONFIG_INET_ESP (as in Debian's linux-image-amd64)"

// kernelESP tries to add an ESP state in a scratch namespace. refused is
// the kernel's answer when it has no ESP; err is set only when the preflight
// itself cannot run.
func kernelESP() (refused, err error) {
	err = netns.Scratch(func(h *netlink.Handle) error {
		return h.XfrmStateAdd(&netlink.XfrmState{
			Src:   net.IPv4(198, 18, 255, 1),
			Dst:   net.IPv4(198, 18, 255, 2),
			Proto: netlink.XFRM_PROTO_ESP,
			Mode:  netlink.XFRM_MODE_TUNNEL,
			Spi:   0x100,
			Reqid: 1,
			Aead:  &netlink.XfrmStateAlgo{Name: "rfc4106(gcm(aes))", Key: make([]byte, 20), ICVLen: 128},
		})
	})
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return nil, fmt.Errorf("ipsec: preflight: adding an xfrm state: %w", err)
	}
	return err, nil
}

// ipsecInner is site i's inner (tunnel mode) address.
func ipsecInner(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 19, 2, byte(i + 1)}) }

// ipsecSite is one site's charon and its files.
type ipsecSite struct {
	site   *netns.Site
	index  int
	dir    string // config, secrets and the charon's /run, removed at close
	conf   string // strongswan.conf
	swan   string // swanctl.conf, holds the PSK
	socket string // vici socket as seen from outside charon's mount namespace
	psk    []byte // the key in swan, kept to rewrite it (exposures)
	daemon *Daemon
}

func (s *ipsecSite) env() []string {
	return []string{"STRONGSWAN_CONF=" + s.conf, "SWANCTL_DIR=" + s.dir}
}

// ipsecLink is a running ipsec datapath.
type ipsecLink struct {
	p       *IPsec
	tools   *ipsecTools
	root    string
	sites   []*ipsecSite
	daemons Daemons
	creds   map[string]ipsecCred // auth cert: each site's files
	once    sync.Once
	err     error

	// mu guards exposures: the services exposed after setup, each
	// with a child SA of its own in every pair that holds its site.
	mu        sync.Mutex
	exposures []ipsecExposure
	nextChild int
}

// Setup writes each site's strongswan.conf and swanctl.conf, starts a
// charon per site in its own mount namespace (a private /run), loads the
// connections and brings every pair's SA up.
func (p *IPsec) Setup(ctx context.Context, tb testbed.Testbed) (_ *Link, err error) {
	ltb, ok := tb.(*netns.Testbed)
	if !ok {
		return nil, notSupported("ipsec: needs the local network-namespace testbed")
	}
	if p.Implementation == IPsecLibreswan {
		return p.setupLibreswan(ctx, ltb)
	}
	tools, err := p.tools(ctx)
	if err != nil {
		return nil, err
	}
	sites := ltb.LocalSites()
	if len(sites) < 2 {
		return nil, fmt.Errorf("ipsec: needs at least 2 sites, the testbed has %d", len(sites))
	}
	psk, err := ipsecKey()
	if err != nil {
		return nil, err
	}
	l := &ipsecLink{p: p, tools: tools, root: filepath.Join(ltb.TempDir(), "ipsec")}
	if err := os.Mkdir(l.root, 0o700); err != nil {
		return nil, fmt.Errorf("ipsec: %w", err)
	}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if p.Auth == "cert" {
		if err := l.issue(sites); err != nil {
			return nil, err
		}
	}
	for i, s := range sites {
		key := psk
		if s.Name() == p.wrongPSK {
			if key, err = ipsecKey(); err != nil {
				return nil, err
			}
		}
		is, err := l.prepare(i, s, sites, key)
		if err != nil {
			return nil, err
		}
		l.sites = append(l.sites, is)
	}
	for _, s := range l.sites {
		if err := l.start(ctx, s); err != nil {
			return nil, err
		}
	}
	for _, s := range l.sites {
		if out, err := l.swanctl(ctx, s, "--load-all", "--file", s.swan); err != nil {
			return nil, fmt.Errorf("ipsec: load connections on site %s: %w\n%s%s", s.site.Name(), err, out, tail(s.daemon.Process))
		}
	}
	for _, a := range l.sites {
		for _, b := range l.sites[a.index+1:] {
			if err := l.initiate(ctx, a, b); err != nil && !p.ignoreSAErrors {
				return nil, err
			}
		}
	}
	comps := l.daemons.Components()
	if !tools.libipsec {
		comps = append(comps, KernelComponent())
	}
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
	}
	target := func(_, to testbed.Site, port int) netip.AddrPort {
		return netip.AddrPortFrom(ipsecInner(index[to.Name()]), uint16(port))
	}
	if p.Mode == "transport" {
		target = UnderlayTarget
	}
	var expose ExposeFunc
	if p.Mode == "tunnel" {
		expose = l.expose
	}
	return &Link{
		Target:     AddrTargets(target),
		Expose:     expose,
		Components: comps,
		Alive:      l.daemons.Alive,
		Close:      func(context.Context) error { return l.close() },
	}, nil
}

// ipsecKey is a fresh 256-bit pre-shared key.
func ipsecKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("ipsec: psk: %w", err)
	}
	return k, nil
}

// prepare writes site i's files and, in tunnel mode, puts its inner address
// on the loopback.
func (l *ipsecLink) prepare(i int, site *netns.Site, sites []*netns.Site, psk []byte) (*ipsecSite, error) {
	s := &ipsecSite{site: site, index: i, dir: filepath.Join(l.root, site.Name()), psk: psk}
	s.conf = filepath.Join(s.dir, "strongswan.conf")
	s.swan = filepath.Join(s.dir, "swanctl.conf")
	s.socket = filepath.Join(s.dir, "run", "charon.vici")
	if err := os.MkdirAll(filepath.Join(s.dir, "run"), 0o700); err != nil {
		return nil, fmt.Errorf("ipsec: site %s: %w", site.Name(), err)
	}
	if err := os.WriteFile(s.conf, []byte(l.strongswanConf()), 0o600); err != nil {
		return nil, fmt.Errorf("ipsec: site %s: %w", site.Name(), err)
	}
	if err := os.WriteFile(s.swan, []byte(l.swanctlConf(i, sites, psk)), 0o600); err != nil {
		return nil, fmt.Errorf("ipsec: site %s: %w", site.Name(), err)
	}
	if l.p.Mode == "tunnel" {
		if err := l.innerAddr(site, i, true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// innerAddr adds or removes site i's inner address on its loopback.
func (l *ipsecLink) innerAddr(site *netns.Site, i int, add bool) error {
	h := site.Netlink()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("ipsec: site %s: %w", site.Name(), err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(ipsecInner(i).AsSlice()), Mask: net.CIDRMask(32, 32)}}
	if add {
		err = h.AddrAdd(lo, a)
	} else if err = h.AddrDel(lo, a); errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("ipsec: site %s: inner address %s: %w", site.Name(), ipsecInner(i), err)
	}
	return nil
}

// charonPlugins is what charon loads; a plugin it cannot find is skipped
// with a log line (Check has made sure the needed ones are there).
func (l *ipsecLink) charonPlugins() string {
	p := "random nonce openssl pem pkcs1 pkcs8 x509 pubkey aes sha1 sha2 hmac gcm kdf gmp"
	if l.tools.libipsec {
		p += " kernel-libipsec"
	}
	return p + " kernel-netlink socket-default vici"
}

// strongswanConf is a site's strongswan.conf. Every value ends its line:
// strongSwan's parser does not take one-line blocks.
func (l *ipsecLink) strongswanConf() string {
	var b strings.Builder
	b.WriteString("# spanperf ipsec: one charon per site, /run private to it\n")
	b.WriteString("charon {\n")
	fmt.Fprintf(&b, "\tload = %s\n", l.charonPlugins())
	b.WriteString("\tinstall_virtual_ip = no\n")
	b.WriteString("\tplugins {\n\t\tvici {\n\t\t\tsocket = unix:///run/charon.vici\n\t\t}\n\t}\n")
	b.WriteString("\tfilelog {\n\t\tstderr {\n\t\t\tdefault = 1\n\t\t\tike_name = yes\n\t\t}\n\t}\n")
	b.WriteString("\tsyslog {\n\t\tdaemon {\n\t\t\tdefault = -1\n\t\t}\n\t}\n")
	b.WriteString("}\n")
	if l.p.brokenConf {
		b.WriteString("charon {\n\tload = = broken\n")
	}
	return b.String()
}

// ipsecConnName names, on one site, the connection to peer.
func ipsecConnName(peer *netns.Site) string { return "to-" + peer.Name() }

// swanctlConf is site i's swanctl.conf: a connection to every other site,
// and the PSK.
func (l *ipsecLink) swanctlConf(i int, sites []*netns.Site, psk []byte) string {
	me := sites[i]
	var b strings.Builder
	b.WriteString("connections {\n")
	for j, peer := range sites {
		if j == i {
			continue
		}
		// The lower site initiates (Setup does, right after loading). Its
		// trap policy routes the peer's traffic into the tunnel even while
		// no SA is up, so none leaks.
		start := "none"
		if i < j {
			start = "trap"
		}
		fmt.Fprintf(&b, "\t%s {\n", ipsecConnName(peer))
		b.WriteString("\t\tversion = 2\n")
		fmt.Fprintf(&b, "\t\tlocal_addrs = %s\n", me.Addr())
		fmt.Fprintf(&b, "\t\tremote_addrs = %s\n", peer.Addr())
		b.WriteString("\t\tproposals = aes256gcm16-prfsha256-ecp256\n")
		if l.tools.libipsec {
			b.WriteString("\t\tencap = yes\n")
		}
		b.WriteString("\t\tdpd_delay = 0\n")
		if l.p.Auth == "cert" {
			l.certAuth(&b, me, peer)
		} else {
			fmt.Fprintf(&b, "\t\tlocal {\n\t\t\tauth = psk\n\t\t\tid = %s\n\t\t}\n", me.Addr())
			fmt.Fprintf(&b, "\t\tremote {\n\t\t\tauth = psk\n\t\t\tid = %s\n\t\t}\n", peer.Addr())
		}
		b.WriteString("\t\tchildren {\n")
		fmt.Fprintf(&b, "\t\t\t%s {\n", ipsecConnName(peer))
		fmt.Fprintf(&b, "\t\t\t\tmode = %s\n", l.p.Mode)
		fmt.Fprintf(&b, "\t\t\t\tesp_proposals = %s\n", l.p.Proposal)
		if l.p.Mode == "tunnel" {
			fmt.Fprintf(&b, "\t\t\t\tlocal_ts = %s\n", ipsecSelectors(i, me))
			fmt.Fprintf(&b, "\t\t\t\tremote_ts = %s\n", ipsecSelectors(j, peer))
		}
		fmt.Fprintf(&b, "\t\t\t\tstart_action = %s\n", start)
		b.WriteString("\t\t\t}\n")
		l.exposureChildren(&b, i, j)
		b.WriteString("\t\t}\n\t}\n")
	}
	b.WriteString("}\nsecrets {\n")
	if l.p.Auth == "cert" {
		// The key is in SWANCTL_DIR/private: nothing secret here.
		b.WriteString("}\n")
		return b.String()
	}
	for j, peer := range sites {
		if j == i || l.p.Auth == "cert" {
			continue
		}
		fmt.Fprintf(&b, "\tike-%s {\n", ipsecConnName(peer))
		fmt.Fprintf(&b, "\t\tid-local = %s\n\t\tid-remote = %s\n", me.Addr(), peer.Addr())
		fmt.Fprintf(&b, "\t\tsecret = 0x%s\n\t}\n", hex.EncodeToString(psk))
	}
	b.WriteString("}\n")
	return b.String()
}

// ipsecSelectors is site i's side of a tunnel-mode child: its inner
// address and the subnets behind it (gateway topology).
func ipsecSelectors(i int, site *netns.Site) string {
	ts := []string{netip.PrefixFrom(ipsecInner(i), 32).String()}
	for _, p := range site.Behind() {
		ts = append(ts, p.String())
	}
	return strings.Join(ts, ",")
}

// start runs the site's charon in the foreground, in its own mount
// namespace where the site's run directory is bind-mounted on /run (for its
// pid file and vici socket), and waits for the vici socket.
func (l *ipsecLink) start(ctx context.Context, s *ipsecSite) error {
	cmd := testbed.Command{
		Name: "charon",
		Path: l.tools.unshare,
		// sh execs charon: the process started is charon itself.
		Args: []string{"--mount", "--propagation", "private", "--", l.tools.sh, "-c",
			`mount --bind "$0" /run && exec "$1"`, filepath.Join(s.dir, "run"), l.tools.charon},
		Env: s.env(),
	}
	ready := func() error {
		c, err := net.DialTimeout("unix", s.socket, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
	d, err := StartDaemon(ctx, "ipsec", "tunnel", s.site, cmd, ready, 20*time.Second)
	if err != nil {
		return err
	}
	s.daemon = d
	l.daemons = append(l.daemons, d)
	return nil
}

// swanctl runs swanctl against site s's charon.
func (l *ipsecLink) swanctl(ctx context.Context, s *ipsecSite, args ...string) (string, error) {
	args = append(args, "--uri", "unix://"+s.socket)
	cmd := exec.CommandContext(ctx, l.tools.swanctl, args...)
	cmd.Env = append(os.Environ(), s.env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return ipsecLastLines(out.String(), 8), err
}

// initiate brings up the SA from site a to site b.
func (l *ipsecLink) initiate(ctx context.Context, a, b *ipsecSite) error {
	name := ipsecConnName(b.site)
	out, err := l.swanctl(ctx, a, "--initiate", "--ike", name, "--child", name, "--timeout", "30")
	if err != nil {
		return fmt.Errorf("ipsec: SA %s → %s did not come up: %w\nswanctl:\n%s\ncharon on %s:\n%s\ncharon on %s:\n%s",
			a.site.Name(), b.site.Name(), err, out, a.site.Name(), a.daemon.Process.Tail(), b.site.Name(), b.daemon.Process.Tail())
	}
	return nil
}

func ipsecLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// close stops the charons (which remove their TUN devices, routes and SAs;
// their /run mounts die with their mount namespaces), removes the inner
// addresses and deletes every file, the PSK included. It runs once.
func (l *ipsecLink) close() error {
	l.once.Do(func() {
		l.daemons.Stop(3 * time.Second)
		var errs []error
		for _, s := range l.sites {
			if l.p.Mode == "tunnel" {
				errs = append(errs, l.innerAddr(s.site, s.index, false))
			}
			errs = append(errs, l.sweepSite(s.site))
		}
		if err := os.RemoveAll(l.root); err != nil {
			errs = append(errs, fmt.Errorf("ipsec: %w", err))
		}
		l.err = errors.Join(errs...)
	})
	return l.err
}

// sweepSite removes what a charon that did not exit cleanly may leave in a
// site: its TUN device and the policy-routing rule to its table (220).
func (l *ipsecLink) sweepSite(site *netns.Site) error {
	h := site.Netlink()
	var errs []error
	if links, err := h.LinkList(); err == nil {
		for _, lk := range links {
			if _, ok := lk.(*netlink.Tuntap); ok && strings.HasPrefix(lk.Attrs().Name, "ipsec") {
				errs = append(errs, h.LinkDel(lk))
			}
		}
	}
	if rules, err := h.RuleList(netlink.FAMILY_V4); err == nil {
		for _, r := range rules {
			if r.Table == 220 {
				errs = append(errs, h.RuleDel(&r))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ipsec: site %s: %w", site.Name(), err)
	}
	return nil
}
