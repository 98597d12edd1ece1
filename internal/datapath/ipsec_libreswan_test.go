package datapath_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

var updateLibreswan = flag.Bool("update", false, "rewrite testdata/ipsec-libreswan/*.golden")

func libreswanOpts(t *testing.T, auth string) map[string]any {
	opts := datapathtest.Defaults(t, "ipsec")
	opts["implementation"] = datapath.IPsecLibreswan
	opts["auth"] = auth
	return opts
}

// TestIPsecLibreswanOptions: implementation is one of strongswan and
// libreswan; libreswan takes tunnel mode over kernel ESP only, refuses the
// gateway topology and exposures, and declares a pluto per site.
func TestIPsecLibreswanOptions(t *testing.T) {
	info, ok := plugins.Datapath("ipsec")
	if !ok {
		t.Fatal("ipsec not registered")
	}
	for _, c := range []struct {
		opts map[string]any
		want string // "" means valid
	}{
		{map[string]any{"implementation": "strongswan"}, ""},
		{map[string]any{"implementation": "libreswan"}, ""},
		{map[string]any{"implementation": "libreswan", "auth": "cert", "proposal": "chacha20poly1305", "esp": "kernel"}, ""},
		{map[string]any{"implementation": "openswan"}, `implementation "openswan" (want one of strongswan, libreswan)`},
		{map[string]any{"implementation": "libreswan", "mode": "transport"}, "libreswan carries tunnel mode only"},
		{map[string]any{"implementation": "libreswan", "esp": "libipsec"}, "libreswan has no userspace ESP"},
		{map[string]any{"implementation": "libreswan", "auth": "eap"}, "auth"},
	} {
		_, err := info.New(c.opts)
		if c.want == "" && err != nil {
			t.Errorf("%v: %v", c.opts, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: error %v, want one naming %q", c.opts, err, c.want)
		}
	}
	dp, err := info.New(map[string]any{"implementation": "libreswan"})
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.(datapath.GatewayChecker).CheckGateway(); err == nil || !strings.Contains(err.Error(), "libreswan") {
		t.Errorf("gateway topology: %v, want a refusal naming libreswan", err)
	}
	if err := dp.(datapath.Exposer).CanExpose(""); err == nil || !strings.Contains(err.Error(), "libreswan") {
		t.Errorf("expose: %v, want a refusal naming libreswan", err)
	}
	comps := info.Components(map[string]any{"implementation": "libreswan"}, 2)
	var names []string
	for _, c := range comps {
		names = append(names, c.Name)
	}
	if len(comps) != 3 || !strings.HasPrefix(names[0], "pluto") || !strings.HasPrefix(names[1], "pluto") {
		t.Errorf("components %v, want a pluto per site and the kernel", names)
	}
	if len(info.Doctor) != 1 || info.Doctor[0]["implementation"] != "libreswan" {
		t.Errorf("doctor option sets %v, want implementation libreswan", info.Doctor)
	}
}

// TestIPsecLibreswanScenario: a scenario file's ipsec entry that breaks
// a rule is refused at parse time naming file:line and the key.
func TestIPsecLibreswanScenario(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{"{name: ipsec, implementation: libreswan}", ""},
		{"{name: ipsec, implementation: libreswan, auth: cert}", ""},
		{"{name: ipsec, implementation: openswan}", `s.yaml:3: datapaths[0].implementation: must be one of strongswan, libreswan, got "openswan"`},
		{"{name: ipsec, implementation: libreswan, mode: transport}", `s.yaml:3: datapaths[0].mode: implementation libreswan carries tunnel mode only`},
		{"{name: ipsec, implementation: libreswan, esp: libipsec}", `s.yaml:3: datapaths[0].esp: implementation libreswan has no userspace ESP`},
		{"{name: ipsec, mode: transport, esp: libipsec}", `s.yaml:3: datapaths[0].mode: transport mode needs kernel ESP`},
	} {
		src := "name: s\ndatapaths:\n  - " + c.entry + "\nworkloads:\n  - type: stream\n"
		_, err := scenario.Parse("s.yaml", []byte(src), plugins.Catalog{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.entry, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.entry, err, c.want)
		}
	}
	gw := "name: s\ntopology: gateway\ndatapaths:\n  - {name: ipsec, implementation: libreswan}\nworkloads:\n  - type: stream\n"
	if _, err := scenario.Parse("s.yaml", []byte(gw), plugins.Catalog{}); err == nil || !strings.Contains(err.Error(), "libreswan") {
		t.Errorf("gateway topology with libreswan: %v, want a parse-time refusal", err)
	}
}

// libreswanGoldenSites are three sites as the netns testbed numbers them.
var libreswanGoldenSites = []datapath.LibreswanSiteForTest{
	{Name: "a", Addr: netip.MustParseAddr("198.18.0.2")},
	{Name: "b", Addr: netip.MustParseAddr("198.18.0.3")},
	{Name: "c", Addr: netip.MustParseAddr("198.18.0.4")},
}

// libreswanGoldenPSK is a fixed key, so the golden files are stable.
var libreswanGoldenPSK = bytes.Repeat([]byte{0xa5}, 32)

// TestIPsecLibreswanFiles compares the ipsec.conf and ipsec.secrets of the
// middle site of three (it answers the lower site, auto=add, and starts the
// higher, auto=start) with testdata/ipsec-libreswan/*.golden, for auth psk
// and cert; -update rewrites them. Every path in them is under the site's
// directory.
func TestIPsecLibreswanFiles(t *testing.T) {
	const dir = "/run/spanperf-test/ipsec/b"
	for _, c := range []struct{ auth, proposal string }{{"psk", "aes128gcm16"}, {"cert", "chacha20poly1305"}} {
		t.Run(c.auth, func(t *testing.T) {
			conf, secrets := datapath.LibreswanFilesForTest(dir, c.proposal, c.auth, 1, libreswanGoldenSites, libreswanGoldenPSK)
			for _, f := range []struct{ name, got string }{{c.auth + ".ipsec.conf", conf}, {c.auth + ".ipsec.secrets", secrets}} {
				golden := filepath.Join("testdata", "ipsec-libreswan", f.name+".golden")
				if *updateLibreswan {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, []byte(f.got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to write it)", err)
				}
				if f.got != string(want) {
					t.Errorf("%s differs from %s (run with -update if the change is meant):\n%s", f.name, golden, f.got)
				}
			}
			for _, line := range strings.Split(conf, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
				if ok && strings.HasPrefix(v, "/") && !strings.HasPrefix(v, dir+"/") && v != dir {
					t.Errorf("ipsec.conf: %s=%s is outside the site's directory", k, v)
				}
			}
		})
	}
}

// libreswanTool finds a program of libreswan's that runs: in the tree
// $SPANPERF_LIBRESWAN_ROOT or /var/tmp/spanperf-libreswan/root (the
// libreswan .deb unpacked, by scripts/deps.sh or `apt-get download
// libreswan && dpkg-deb -x libreswan_*.deb DIR`, which installs nothing),
// else where the package puts it.
func libreswanTool(t *testing.T, name string) string {
	t.Helper()
	var dirs []string
	for _, root := range []string{os.Getenv("SPANPERF_LIBRESWAN_ROOT"), "/var/tmp/spanperf-libreswan/root"} {
		if root != "" {
			dirs = append(dirs, filepath.Join(root, "usr/libexec/ipsec"))
		}
	}
	var tried []string
	for _, d := range append(dirs, "/usr/libexec/ipsec", "/usr/lib/ipsec") {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err != nil {
			tried = append(tried, p)
			continue
		}
		// Unpacked, it may lack a library only the package's dependencies bring.
		if out, err := exec.Command(p, "--help").CombinedOutput(); bytes.Contains(out, []byte("error while loading shared libraries")) {
			tried = append(tried, fmt.Sprintf("%s (%v: %s)", p, err, bytes.TrimSpace(out)))
			continue
		}
		return p
	}
	t.Skipf("no libreswan %s that runs (tried %s): install Debian's libreswan (it conflicts with strongSwan's packages) or unpack its .deb (scripts/deps.sh does)", name, strings.Join(tried, ", "))
	return ""
}

// TestIPsecLibreswanConfigParses runs libreswan's own parser on the
// generated ipsec.conf (`addconn --config FILE --checkconfig`: keywords
// and their values; it reads the file and writes nothing) and its
// algorithm parser on the IKE and ESP proposals (`algparse -v2`), for
// auth psk and cert and every ESP proposal. It skips where libreswan's
// tools are absent.
func TestIPsecLibreswanConfigParses(t *testing.T) {
	addconn := libreswanTool(t, "addconn")
	algparse := filepath.Join(filepath.Dir(addconn), "algparse")
	for _, auth := range []string{"psk", "cert"} {
		for _, prop := range []string{"aes128gcm16", "aes256gcm16", "chacha20poly1305"} {
			dir := t.TempDir()
			conf, _ := datapath.LibreswanFilesForTest(dir, prop, auth, 1, libreswanGoldenSites, libreswanGoldenPSK)
			file := filepath.Join(dir, "ipsec.conf")
			if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(addconn, "--config", file, "--checkconfig").CombinedOutput(); err != nil {
				t.Errorf("%s %s: addconn --checkconfig: %v\n%s\n%s", auth, prop, err, out, conf)
			}
			for _, line := range strings.Split(conf, "\n") {
				if l := strings.TrimSpace(line); strings.HasPrefix(l, "ike=") || strings.HasPrefix(l, "esp=") {
					out, err := exec.Command(algparse, "-v2", l).CombinedOutput()
					if err != nil || bytes.Contains(out, []byte("ERROR")) || bytes.Contains(out, []byte("invalid")) {
						t.Errorf("%s %s: algparse -v2 %s: %v\n%s", auth, prop, l, err, out)
					}
				}
			}
		}
	}
	// The control: the parser does refuse a bad value.
	bad := filepath.Join(t.TempDir(), "ipsec.conf")
	os.WriteFile(bad, []byte("config setup\n\nconn x\n\ttype=tunel\n"), 0o600)
	if out, err := exec.Command(addconn, "--config", bad, "--checkconfig").CombinedOutput(); err == nil {
		t.Errorf("addconn --checkconfig took type=tunel: %s", out)
	}
}

// TestIPsecLibreswanPreflight: on a kernel without ESP the libreswan
// implementation is refused by its preflight with the reason, and Setup
// builds nothing. Where pluto is absent the refusal also names the Debian
// package and its conflict with strongSwan's.
func TestIPsecLibreswanPreflight(t *testing.T) {
	datapathtest.RequireRoot(t)
	info, _ := plugins.Datapath("ipsec")
	for _, auth := range []string{"psk", "cert"} {
		dp, err := info.New(libreswanOpts(t, auth))
		if err != nil {
			t.Fatal(err)
		}
		err = dp.(datapath.Checker).Check(context.Background())
		if err == nil {
			t.Skip("libreswan can run here: its preflight passes")
		}
		t.Logf("%s: %v", auth, err)
		if !errors.Is(err, datapath.ErrNotSupported) {
			t.Errorf("%s: %v, want ErrNotSupported", auth, err)
		}
		if datapath.KernelESPForTest() != nil && !strings.Contains(err.Error(), "kernel lacks ESP (CONFIG_INET_ESP") {
			t.Errorf("%s: %v, want it to say the kernel lacks ESP (CONFIG_INET_ESP)", auth, err)
		}
		if _, serr := os.Stat("/usr/libexec/ipsec/pluto"); serr != nil {
			for _, want := range []string{"no pluto", "Debian package libreswan", "strongswan-libcharon"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want it to name %q", auth, err, want)
				}
			}
		}
	}
	dp, _ := info.New(libreswanOpts(t, "psk"))
	tb := datapathtest.Testbed(t, netns.Spec{})
	if link, err := dp.Setup(context.Background(), tb); err == nil {
		link.Close(context.Background())
		t.Error("libreswan setup succeeded where its preflight refuses")
	} else if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "implementation libreswan") {
		t.Errorf("setup: %v, want the preflight's refusal", err)
	} else {
		t.Logf("setup (expected): %v", err)
	}
	libreswanCheckGone(t, tb, nil)
}

// The tests below need libreswan and kernel ESP: they skip here (see
// TestIPsecLibreswanPreflight) and run where both are.

func TestIPsecLibreswanCarriesAll(t *testing.T) {
	for _, auth := range []string{"psk", "cert"} {
		t.Run(auth, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, "ipsec", libreswanOpts(t, auth))
			for _, c := range link.Components {
				if c.Role == "tunnel" && !strings.HasPrefix(c.Name, "pluto") {
					t.Errorf("component %+v, want pluto", c)
				}
			}
			datapathtest.CarriesAll(t, tb, link)
		})
	}
}

// TestIPsecLibreswanWrongKey: a site with another PSK (or, with auth cert,
// a certificate from a CA nobody trusts) gets no SA.
func TestIPsecLibreswanWrongKey(t *testing.T) {
	for _, auth := range []string{"psk", "cert"} {
		t.Run(auth, func(t *testing.T) {
			datapathtest.New(t, "ipsec", libreswanOpts(t, auth))
			dp, err := datapath.IPsecForTest(libreswanOpts(t, auth), "b", false, false)
			if err != nil {
				t.Fatal(err)
			}
			tb := datapathtest.Testbed(t, netns.Spec{})
			link, err := dp.Setup(context.Background(), tb)
			if err == nil {
				link.Close(context.Background())
				t.Fatal("setup with a wrong key succeeded")
			}
			for _, want := range []string{"a → b", "AUTHENTICATION_FAILED"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("setup error does not name %q: %v", want, err)
				}
			}
			libreswanCheckGone(t, tb, nil)
		})
	}
}

// TestIPsecLibreswanLeavesNothing: while up, a pluto per site and xfrm
// states; after Close, no pluto, no xfrm state or policy, no file.
func TestIPsecLibreswanLeavesNothing(t *testing.T) {
	dp := datapathtest.New(t, "ipsec", libreswanOpts(t, "cert"))
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := dp.Setup(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, c := range link.Components {
		if c.PID != 0 {
			pids = append(pids, c.PID)
		}
	}
	if len(pids) != 2 {
		t.Errorf("components %+v, want two plutos", link.Components)
	}
	for _, s := range tb.LocalSites() {
		if st, _ := s.Netlink().XfrmStateList(netlink.FAMILY_ALL); len(st) == 0 {
			t.Errorf("site %s: no xfrm state while up", s.Name())
		}
	}
	if err := link.Close(context.Background()); err != nil {
		t.Errorf("link close: %v", err)
	}
	libreswanCheckGone(t, tb, pids)
}

// libreswanCheckGone fails t if a pluto of pids runs, a site holds an xfrm
// state or policy, or an ipsec file remains.
func libreswanCheckGone(t *testing.T, tb *netns.Testbed, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && filepath.Base(exe) == "pluto" {
			t.Errorf("pluto %d still running", pid)
		}
	}
	for _, s := range tb.LocalSites() {
		if st, _ := s.Netlink().XfrmStateList(netlink.FAMILY_ALL); len(st) != 0 {
			t.Errorf("site %s: xfrm states left: %v", s.Name(), st)
		}
		if ps, _ := s.Netlink().XfrmPolicyList(netlink.FAMILY_ALL); len(ps) != 0 {
			t.Errorf("site %s: xfrm policies left: %v", s.Name(), ps)
		}
	}
	if _, err := os.Stat(filepath.Join(tb.TempDir(), "ipsec")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ipsec files left in %s (%v)", tb.TempDir(), err)
	}
}

// TestIPsecLibreswanNSS builds a site's NSS database with the real NSS
// tools as Setup does: with auth cert it trusts the run's CA as an issuer
// (CT,,), holds the site's certificate with its private key, and certutil
// verifies that certificate against the CA; the PKCS#12 file and its
// password are gone. With auth psk the database exists and holds nothing
// (pluto refuses to start without one). Control: a certificate from the
// other site's CA does not verify in a database that trusts another CA.
func TestIPsecLibreswanNSS(t *testing.T) {
	for _, tool := range []string{"certutil", "pk12util", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (Debian packages libnss3-tools, openssl; scripts/deps.sh installs them)", tool)
		}
	}
	ctx := context.Background()
	root := t.TempDir()
	if err := datapath.LibreswanNSSForTest(ctx, root, []string{"a", "b"}, "a", true); err != nil {
		t.Fatal(err)
	}
	db := "sql:" + filepath.Join(root, "a", "nss")
	certutil := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("certutil", append(args, "-d", db)...).CombinedOutput()
		if err != nil {
			t.Fatalf("certutil %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := certutil("-L")
	t.Logf("certutil -L:\n%s", list)
	if !regexpLine(list, `^spanperf-ipsec-ca\s+CT,,\s*$`) || !regexpLine(list, `^a\s+u,u,u\s*$`) {
		t.Errorf("want the CA trusted as an issuer (CT,,) and a's certificate with its key (u,u,u):\n%s", list)
	}
	if keys := certutil("-K"); !strings.Contains(keys, "ec ") || !strings.Contains(keys, " a") {
		t.Errorf("want a's EC private key:\n%s", keys)
	}
	if v := certutil("-V", "-u", "C", "-n", "a"); !strings.Contains(v, "certificate is valid") {
		t.Errorf("a's certificate does not verify against the CA:\n%s", v)
	}
	left, _ := filepath.Glob(filepath.Join(root, "a", "*.p*"))
	if len(left) != 0 {
		t.Errorf("PKCS#12 file or password left: %v", left)
	}

	// PSK: an empty database.
	if err := datapath.LibreswanNSSForTest(ctx, filepath.Join(root, "psk"), []string{"a", "b"}, "a", false); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("certutil", "-L", "-d", "sql:"+filepath.Join(root, "psk", "a", "nss")).CombinedOutput()
	if err != nil || regexpLine(string(out), `^a\s`) {
		t.Errorf("psk: certutil -L: %v, want an empty database:\n%s", err, out)
	}

	// Control: b's certificate from another CA (the wrong-key hook) does
	// not verify in a's database.
	other := filepath.Join(root, "other")
	if err := datapath.LibreswanNSSForTest(ctx, other, []string{"a", "b"}, "a", true); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(other, "pki", "b.crt")
	if _, err := os.Stat(foreign); err != nil {
		t.Fatal(err)
	}
	certutil("-A", "-n", "foreign-b", "-t", ",,", "-a", "-i", foreign)
	if out, err := exec.Command("certutil", "-V", "-u", "C", "-n", "foreign-b", "-d", db).CombinedOutput(); err == nil && strings.Contains(string(out), "certificate is valid") {
		t.Errorf("a certificate from another run's CA verifies:\n%s", out)
	} else {
		t.Logf("foreign certificate (expected to fail): %v: %s", err, strings.TrimSpace(string(out)))
	}
}

// regexpLine reports whether a line of s matches re.
func regexpLine(s, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(s)
}
