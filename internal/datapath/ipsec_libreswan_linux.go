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

	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// The ipsec implementations.
const (
	// IPsecStrongSwan is strongSwan's charon, configured through swanctl.
	IPsecStrongSwan = "strongswan"
	// IPsecLibreswan is libreswan's pluto (Submariner's default), with
	// kernel ESP.
	IPsecLibreswan = "libreswan"
)

var ipsecImplementations = []string{IPsecStrongSwan, IPsecLibreswan}

// libreswanDirs are where distributions put pluto, addconn and whack.
var libreswanDirs = []string{"/usr/libexec/ipsec", "/usr/lib/ipsec", "/usr/local/libexec/ipsec"}

// libreswanPackage says where libreswan comes from on Debian, and why it
// may be absent where strongSwan is installed.
const libreswanPackage = "Debian package libreswan, which conflicts with strongSwan's strongswan-libcharon and strongswan-starter: a machine has one or the other"

// combination reports the first rule the options break together, and
// the key at fault: spanperf's libreswan path is IKEv2 tunnel mode over
// kernel ESP, and strongSwan's kernel-libipsec carries tunnel mode only.
func (p *IPsec) combination() (key string, err error) {
	switch {
	case p.Implementation == IPsecLibreswan && p.Mode != "tunnel":
		return "mode", fmt.Errorf("ipsec: implementation libreswan carries tunnel mode only (mode %q)", p.Mode)
	case p.Implementation == IPsecLibreswan && p.ESP == "libipsec":
		return "esp", errors.New("ipsec: implementation libreswan has no userspace ESP: esp libipsec is strongSwan's (use esp: kernel or auto)")
	case p.Mode == "transport" && p.ESP == "libipsec":
		return "mode", errors.New("ipsec: transport mode needs kernel ESP: kernel-libipsec carries tunnel mode only (use esp: kernel or auto)")
	}
	return "", nil
}

// ipsecCheckOptions checks at parse time that the ipsec options make
// sense together, naming the key at fault (each value's own choices are
// checked by the parser, from the fields' Enum).
func ipsecCheckOptions(o map[string]any) error {
	p, err := newIPsec(o)
	if err == nil {
		return nil
	}
	key, cerr := p.combination()
	if cerr == nil {
		return err
	}
	return &scenario.FieldError{Key: key, Msg: strings.TrimPrefix(cerr.Error(), "ipsec: ")}
}

// libreswanTools are the programs a libreswan Setup runs, as found by
// IPsec.libreswanTools.
type libreswanTools struct {
	pluto, addconn, whack string
	ip                    string // runs addconn and whack in a site's namespace
	certutil              string // makes each site's NSS database (pluto needs one even with auth psk)
	pk12util, openssl     string // auth cert: make and import each site's PKCS#12
}

// libreswanTools is the libreswan preflight: pluto, addconn and whack,
// certutil and ip, pk12util and openssl with auth cert, and kernel ESP
// (libreswan has no userspace ESP), tried by adding an ESP xfrm state in a
// scratch namespace. It refuses with every reason it finds, before anything is
// built.
func (p *IPsec) libreswanTools() (*libreswanTools, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &libreswanTools{}
	var reasons []string
	for _, dir := range libreswanDirs {
		if st, err := os.Stat(filepath.Join(dir, "pluto")); err == nil && st.Mode().IsRegular() {
			t.pluto, t.addconn, t.whack = filepath.Join(dir, "pluto"), filepath.Join(dir, "addconn"), filepath.Join(dir, "whack")
			break
		}
	}
	if t.pluto == "" {
		reasons = append(reasons, fmt.Sprintf("no pluto in %s (%s)", strings.Join(libreswanDirs, ", "), libreswanPackage))
	} else {
		for _, f := range []string{t.addconn, t.whack} {
			if _, err := os.Stat(f); err != nil {
				reasons = append(reasons, fmt.Sprintf("no %s beside pluto (%s)", filepath.Base(f), libreswanPackage))
			}
		}
	}
	type prog struct {
		dst       *string
		name, pkg string
	}
	progs := []prog{{&t.certutil, "certutil", "libnss3-tools"}, {&t.ip, "ip", "iproute2"}}
	if p.Auth == "cert" {
		progs = append(progs, prog{&t.pk12util, "pk12util", "libnss3-tools"}, prog{&t.openssl, "openssl", "openssl"})
	}
	for _, prog := range progs {
		path, err := exec.LookPath(prog.name)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("no %s (Debian package %s)", prog.name, prog.pkg))
		}
		*prog.dst = path
	}
	refused, err := kernelESP()
	if err != nil {
		return nil, err
	}
	if refused != nil {
		reasons = append(reasons, fmt.Sprintf("kernel lacks ESP (CONFIG_INET_ESP, with CONFIG_XFRM and CONFIG_XFRM_USER, as in Debian's linux-image-amd64) and libreswan has no userspace ESP (adding an xfrm state: %v)", refused))
	}
	if len(reasons) > 0 {
		return nil, notSupported("ipsec: implementation libreswan: %s", strings.Join(reasons, "; "))
	}
	return t, nil
}

// libreswanEnd is one site as a libreswan conn names it.
type libreswanEnd struct {
	name    string
	addr    netip.Addr     // underlay: left=, right=, and the PSK's index
	inner   netip.Addr     // tunnel-mode inner address: leftsourceip=
	subnets []netip.Prefix // leftsubnet=: the inner /32, then the subnets behind
}

// libreswanFiles writes one site's ipsec.conf and ipsec.secrets; every path
// in them is under dir, the site's own directory.
type libreswanFiles struct {
	dir      string // the site's directory
	proposal string // the IPsec option: ESP proposal in strongSwan's spelling
	auth     string // psk or cert
	me       int    // index of this site in ends
	ends     []libreswanEnd
	psk      []byte // auth psk
}

// libreswanESP spells the strongSwan ESP proposals in libreswan's terms
// (all AEAD: no separate integrity algorithm).
var libreswanESP = map[string]string{
	"aes128gcm16":      "aes_gcm128",
	"aes256gcm16":      "aes_gcm256",
	"chacha20poly1305": "chacha20_poly1305",
}

// libreswanIKE is strongSwan's IKE proposal aes256gcm16-prfsha256-ecp256
// in libreswan's terms.
const libreswanIKE = "aes_gcm256-sha2_256;dh19"

// libreswanNick is a site's certificate's nickname in its NSS database.
func libreswanNick(site string) string { return site }

// libreswanCANick is the run CA's nickname in every site's NSS database.
const libreswanCANick = "spanperf-ipsec-ca"

func (f libreswanFiles) nssDir() string     { return filepath.Join(f.dir, "nss") }
func (f libreswanFiles) runDir() string     { return filepath.Join(f.dir, "run") }
func (f libreswanFiles) confFile() string   { return filepath.Join(f.dir, "ipsec.conf") }
func (f libreswanFiles) secretFile() string { return filepath.Join(f.dir, "ipsec.secrets") }
func (f libreswanFiles) ctlSocket() string  { return filepath.Join(f.runDir(), "pluto.ctl") }

// ipsecConf is the site's ipsec.conf: `config setup` keeping every file of
// pluto's under dir, and a conn per peer: IKEv2, tunnel mode, the inner
// address (and the subnets behind) on each side. The lower site of a pair
// starts the conn (auto=start), the higher one waits for it (auto=add), as
// on the strongSwan path.
func (f libreswanFiles) ipsecConf() string {
	me := f.ends[f.me]
	var b strings.Builder
	fmt.Fprintf(&b, "# spanperf ipsec (libreswan): site %s's pluto; every file under its own directory\n", me.name)
	b.WriteString("config setup\n")
	fmt.Fprintf(&b, "\tipsecdir=%s\n", f.dir)
	fmt.Fprintf(&b, "\tnssdir=%s\n", f.nssDir())
	fmt.Fprintf(&b, "\tsecretsfile=%s\n", f.secretFile())
	fmt.Fprintf(&b, "\tdumpdir=%s\n", f.runDir())
	b.WriteString("\tuniqueids=yes\n")
	for j, peer := range f.ends {
		if j == f.me {
			continue
		}
		auto := "add"
		if f.me < j {
			auto = "start"
		}
		fmt.Fprintf(&b, "\nconn %s\n", libreswanConnName(peer.name))
		b.WriteString("\tikev2=yes\n")
		b.WriteString("\ttype=tunnel\n")
		fmt.Fprintf(&b, "\tike=%s\n", libreswanIKE)
		fmt.Fprintf(&b, "\tesp=%s\n", libreswanESP[f.proposal])
		// As the strongSwan child: no DH group in the ESP proposal.
		b.WriteString("\tpfs=no\n")
		fmt.Fprintf(&b, "\tleft=%s\n", me.addr)
		fmt.Fprintf(&b, "\tleftsubnet=%s\n", libreswanSubnets(me.subnets))
		fmt.Fprintf(&b, "\tleftsourceip=%s\n", me.inner)
		fmt.Fprintf(&b, "\tright=%s\n", peer.addr)
		fmt.Fprintf(&b, "\trightsubnet=%s\n", libreswanSubnets(peer.subnets))
		if f.auth == "cert" {
			// The pki's ECDSA P-256 certificates carry the site's name as
			// a DNS SAN: each side proves its name, as on the strongSwan path.
			b.WriteString("\tauthby=ecdsa\n")
			fmt.Fprintf(&b, "\tleftid=@%s\n", me.name)
			fmt.Fprintf(&b, "\tleftcert=%s\n", libreswanNick(me.name))
			b.WriteString("\tleftsendcert=always\n")
			fmt.Fprintf(&b, "\trightid=@%s\n", peer.name)
			fmt.Fprintf(&b, "\trightca=%%same\n")
		} else {
			b.WriteString("\tauthby=secret\n")
			fmt.Fprintf(&b, "\tleftid=%s\n", me.addr)
			fmt.Fprintf(&b, "\trightid=%s\n", peer.addr)
		}
		fmt.Fprintf(&b, "\tauto=%s\n", auto)
	}
	return b.String()
}

// secrets is the site's ipsec.secrets: the PSK for each peer (auth psk);
// with auth cert the private key is in the NSS database and nothing is
// here.
func (f libreswanFiles) secrets() string {
	me := f.ends[f.me]
	var b strings.Builder
	fmt.Fprintf(&b, "# spanperf ipsec (libreswan): site %s\n", me.name)
	if f.auth == "cert" {
		b.WriteString("# auth cert: the private key is in the NSS database\n")
		return b.String()
	}
	for j, peer := range f.ends {
		if j != f.me {
			fmt.Fprintf(&b, "%s %s : PSK 0x%s\n", me.addr, peer.addr, hex.EncodeToString(f.psk))
		}
	}
	return b.String()
}

// libreswanSubnets is a leftsubnet= value: one subnet as is, several as
// libreswan's {a,b} list.
func libreswanSubnets(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	if len(s) == 1 {
		return s[0]
	}
	return "{" + strings.Join(s, ",") + "}"
}

// libreswanConnName names, on one site, the conn to peer.
func libreswanConnName(peer string) string { return "to-" + peer }

// libreswanSite is one site's pluto and its files.
type libreswanSite struct {
	site   *netns.Site
	index  int
	files  libreswanFiles
	daemon *Daemon
}

// libreswanLink is a running libreswan ipsec datapath.
type libreswanLink struct {
	p       *IPsec
	tools   *libreswanTools
	root    string
	sites   []*libreswanSite
	daemons Daemons
	once    sync.Once
	err     error
}

// setupLibreswan writes each site's ipsec.conf, ipsec.secrets and NSS
// database under the run's directory, starts a pluto per site in
// its namespace with every path its own, loads the conns and waits until
// every pair's SA is up.
func (p *IPsec) setupLibreswan(ctx context.Context, ltb *netns.Testbed) (_ *Link, err error) {
	tools, err := p.libreswanTools()
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
	l := &libreswanLink{p: p, tools: tools, root: filepath.Join(ltb.TempDir(), "ipsec")}
	if err := os.Mkdir(l.root, 0o700); err != nil {
		return nil, fmt.Errorf("ipsec: %w", err)
	}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	ends := make([]libreswanEnd, len(sites))
	for i, s := range sites {
		ends[i] = libreswanEnd{name: s.Name(), addr: s.Addr(), inner: ipsecInner(i), subnets: append([]netip.Prefix{netip.PrefixFrom(ipsecInner(i), 32)}, s.Behind()...)}
	}
	// The certificates come from the strongSwan path's code: the same CA,
	// names and test hook (a site whose CA no other site trusts).
	var creds map[string]ipsecCred
	if p.Auth == "cert" {
		issuer := &ipsecLink{p: p, root: l.root}
		if err := issuer.issue(sites); err != nil {
			return nil, err
		}
		creds = issuer.creds
	}
	for i, s := range sites {
		key := psk
		if s.Name() == p.wrongPSK {
			if key, err = ipsecKey(); err != nil {
				return nil, err
			}
		}
		ls := &libreswanSite{site: s, index: i, files: libreswanFiles{dir: filepath.Join(l.root, s.Name()), proposal: p.Proposal, auth: p.Auth, me: i, ends: ends, psk: key}}
		l.sites = append(l.sites, ls)
		if err := l.prepare(ctx, ls, creds[s.Name()]); err != nil {
			return nil, err
		}
	}
	for _, s := range l.sites {
		if err := l.start(ctx, s); err != nil {
			return nil, err
		}
	}
	// Last site first: a site starts its conns to the higher sites only,
	// and those then already answer (tried by hand: a conn loaded after
	// its peer's IKE_SA_INIT drops that IKE SA and the initiator retries).
	for _, s := range slices.Backward(l.sites) {
		if out, err := l.inSite(ctx, s, l.tools.addconn, "--config", s.files.confFile(), "--ctlsocket", s.files.ctlSocket(), "--autoall"); err != nil {
			return nil, fmt.Errorf("ipsec: load conns on site %s: %w\n%s%s", s.site.Name(), err, out, tail(s.daemon.Process))
		}
	}
	for _, a := range l.sites {
		for _, b := range l.sites[a.index+1:] {
			if err := l.waitUp(ctx, a, b, 30*time.Second); err != nil && !p.ignoreSAErrors {
				return nil, err
			}
		}
	}
	index := map[string]int{}
	for i, s := range sites {
		index[s.Name()] = i
	}
	return &Link{
		Target: AddrTargets(func(_, to testbed.Site, port int) netip.AddrPort {
			return netip.AddrPortFrom(ipsecInner(index[to.Name()]), uint16(port))
		}),
		Components: append(l.daemons.Components(), KernelComponent()),
		Alive:      l.daemons.Alive,
		Close:      func(context.Context) error { return l.close() },
	}, nil
}

// prepare writes site s's files (0600) and its NSS database (with auth
// cert, holding its certificate and key), and puts its inner address on
// its loopback.
func (l *libreswanLink) prepare(ctx context.Context, s *libreswanSite, cred ipsecCred) error {
	f := s.files
	if err := os.MkdirAll(f.runDir(), 0o700); err != nil {
		return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
	}
	for _, w := range []struct{ path, data string }{{f.confFile(), f.ipsecConf()}, {f.secretFile(), f.secrets()}} {
		if err := os.WriteFile(w.path, []byte(w.data), 0o600); err != nil {
			return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
		}
	}
	if err := libreswanNSS(ctx, l.tools, f, s.site.Name(), l.p.Auth == "cert", cred); err != nil {
		return fmt.Errorf("ipsec: site %s: %w", s.site.Name(), err)
	}
	return (&ipsecLink{p: l.p}).innerAddr(s.site, s.index, true)
}

// libreswanNSS makes a site's NSS database in f.nssDir(), what `ipsec
// initnss --nssdir` makes (an sql database with an empty password; pluto
// refuses to start without one, even with auth psk). With cert it imports
// the CA as a trusted issuer and the site's certificate and key, through a
// PKCS#12 file under a random password that it then removes.
func libreswanNSS(ctx context.Context, t *libreswanTools, f libreswanFiles, site string, cert bool, cred ipsecCred) error {
	db := "sql:" + f.nssDir()
	if err := os.Mkdir(f.nssDir(), 0o700); err != nil {
		return fmt.Errorf("nss database: %w", err)
	}
	cmds := [][]string{{t.certutil, "-N", "-d", db, "--empty-password"}}
	if cert {
		pw := make([]byte, 16)
		if _, err := rand.Read(pw); err != nil {
			return fmt.Errorf("nss database: %w", err)
		}
		pwFile := filepath.Join(f.dir, "p12.pass")
		p12 := filepath.Join(f.dir, site+".p12")
		if err := os.WriteFile(pwFile, []byte(hex.EncodeToString(pw)+"\n"), 0o600); err != nil {
			return fmt.Errorf("nss database: %w", err)
		}
		defer os.Remove(p12)
		defer os.Remove(pwFile)
		cmds = append(cmds,
			[]string{t.certutil, "-A", "-d", db, "-n", libreswanCANick, "-t", "CT,,", "-a", "-i", cred.ca},
			[]string{t.openssl, "pkcs12", "-export", "-in", cred.cert, "-inkey", cred.key, "-name", libreswanNick(site), "-out", p12, "-passout", "file:" + pwFile},
			[]string{t.pk12util, "-i", p12, "-d", db, "-w", pwFile})
	}
	for _, c := range cmds {
		if out, err := libreswanRun(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("nss database: %s: %w\n%s", filepath.Base(c[0]), err, out)
		}
	}
	return nil
}

// start runs site s's pluto in the foreground in the site's namespace,
// every path its own (never the machine's /etc/ipsec.*, /run/pluto or
// /var/lib/ipsec/nss), and waits for its control socket.
func (l *libreswanLink) start(ctx context.Context, s *libreswanSite) error {
	f := s.files
	cmd := testbed.Command{
		Name: "pluto",
		Path: l.tools.pluto,
		Args: []string{"--config", f.confFile(), "--nofork", "--stderrlog",
			"--rundir", f.runDir(), "--nssdir", f.nssDir(), "--ipsecdir", f.dir, "--secretsfile", f.secretFile()},
	}
	ready := func() error {
		c, err := net.DialTimeout("unix", f.ctlSocket(), time.Second)
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

// waitUp waits until a's pluto reports an IPsec SA of its conn to b
// (`whack --trafficstatus`), polling for at most limit.
func (l *libreswanLink) waitUp(ctx context.Context, a, b *libreswanSite, limit time.Duration) error {
	want := `"` + libreswanConnName(b.site.Name()) + `"`
	start := time.Now()
	deadline := start.Add(limit)
	var last string
	for {
		out, err := l.inSite(ctx, a, l.tools.whack, "--ctlsocket", a.files.ctlSocket(), "--trafficstatus")
		if err == nil && strings.Contains(out, want) {
			return nil
		}
		last = out
		if err != nil {
			last = fmt.Sprintf("%v: %s", err, out)
		}
		// A refused key or certificate will not heal: say so at once.
		refused := strings.Contains(a.daemon.Process.Tail(), "AUTHENTICATION_FAILED")
		if refused || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("ipsec: SA %s → %s did not come up (waited %s): last whack --trafficstatus: %s\npluto on %s:\n%s\npluto on %s:\n%s",
				a.site.Name(), b.site.Name(), time.Since(start).Round(time.Millisecond), last, a.site.Name(), a.daemon.Process.Tail(), b.site.Name(), b.daemon.Process.Tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inSite runs a libreswan tool in site s's namespace, as pluto runs.
func (l *libreswanLink) inSite(ctx context.Context, s *libreswanSite, prog string, args ...string) (string, error) {
	return libreswanRun(ctx, l.tools.ip, append([]string{"netns", "exec", s.site.Namespace(), prog}, args...)...)
}

// libreswanRun runs a libreswan, NSS or openssl tool and returns its last
// lines.
func libreswanRun(ctx context.Context, prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return ipsecLastLines(out.String(), 8), err
}

// close stops the plutos, removes every xfrm state and policy from the
// sites (the run's own namespaces: a pluto killed before its cleanup
// leaves them in the kernel), the inner addresses and every file, keys and
// NSS databases included. It runs once.
func (l *libreswanLink) close() error {
	l.once.Do(func() {
		l.daemons.Stop(3 * time.Second)
		var errs []error
		for _, s := range l.sites {
			h := s.site.Netlink()
			if err := h.XfrmPolicyFlush(); err != nil {
				errs = append(errs, fmt.Errorf("ipsec: site %s: flush xfrm policies: %w", s.site.Name(), err))
			}
			if err := h.XfrmStateFlush(0); err != nil {
				errs = append(errs, fmt.Errorf("ipsec: site %s: flush xfrm states: %w", s.site.Name(), err))
			}
			errs = append(errs, (&ipsecLink{p: l.p}).innerAddr(s.site, s.index, false))
		}
		if err := os.RemoveAll(l.root); err != nil {
			errs = append(errs, fmt.Errorf("ipsec: %w", err))
		}
		l.err = errors.Join(errs...)
	})
	return l.err
}
