package datapath_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func TestIPsecOptions(t *testing.T) {
	info, ok := plugins.Datapath("ipsec")
	if !ok {
		t.Fatal("ipsec not registered")
	}
	for _, c := range []struct {
		opts map[string]any
		want string // "" means valid
	}{
		{map[string]any{}, ""},
		{map[string]any{"proposal": "chacha20poly1305", "mode": "tunnel", "esp": "libipsec"}, ""},
		{map[string]any{"proposal": "aes256gcm16", "mode": "transport", "esp": "kernel"}, ""},
		{map[string]any{"proposal": "3des"}, "proposal"},
		{map[string]any{"mode": "beet"}, "mode"},
		{map[string]any{"esp": "fpga"}, "esp"},
		{map[string]any{"mode": "transport", "esp": "libipsec"}, "transport mode needs kernel ESP"},
		{map[string]any{"auth": "cert"}, ""},
		{map[string]any{"auth": "eap"}, "auth"},
	} {
		_, err := info.New(c.opts)
		if c.want == "" && err != nil {
			t.Errorf("%v: %v", c.opts, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: error %v, want one naming %q", c.opts, err, c.want)
		}
	}
}

func TestIPsecCarriesAll(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "ipsec", nil)
	if len(link.Components) != 2 {
		t.Errorf("components %+v, want one charon per site", link.Components)
	}
	for _, c := range link.Components {
		if c.Role != "tunnel" || !strings.HasPrefix(c.Name, "charon") || c.PID == 0 {
			t.Errorf("component %+v, want a charon with role tunnel and a PID", c)
		}
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(c.PID) + "/exe"); filepath.Base(exe) != "charon" {
			t.Errorf("component %s: PID %d runs %q, not charon", c.Name, c.PID, exe)
		}
	}
	datapathtest.CarriesAll(t, tb, link)
}

// TestIPsecProposals brings the tunnel up with each other ESP proposal
// and carries a connection through it.
func TestIPsecProposals(t *testing.T) {
	for _, prop := range []string{"aes256gcm16", "chacha20poly1305"} {
		t.Run(prop, func(t *testing.T) {
			opts := datapathtest.Defaults(t, "ipsec")
			opts["proposal"] = prop
			tb, link := datapathtest.Setup(t, netns.Spec{}, "ipsec", opts)
			a, b := tb.LocalSites()[0], tb.LocalSites()[1]
			datapathtest.Serve(t, b, datapathtest.AddrOf(t, link.Target(a, b, 7199)))
			if err := datapathtest.Dial(a, datapathtest.AddrOf(t, link.Target(a, b, 7199)), 10*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestIPsecFullMesh checks that every site reaches every other through the
// tunnels, on three sites.
func TestIPsecFullMesh(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{Sites: 3}, "ipsec", nil)
	datapathtest.AllReach(t, tb, link, 7199, 10*time.Second)
}

// TestIPsecWrongPSK: a site keyed with another PSK gets no SA and no
// traffic through. TestIPsecCarriesAll, with the same setup and the right
// PSK, is the control.
func TestIPsecWrongPSK(t *testing.T) {
	for _, c := range []struct {
		name     string
		goOnFail bool // Setup goes on without the SA: try traffic
	}{{"setup-fails", false}, {"no-traffic", true}} {
		t.Run(c.name, func(t *testing.T) {
			datapathtest.New(t, "ipsec", nil) // skips where ipsec cannot run
			dp, err := datapath.IPsecForTest(datapathtest.Defaults(t, "ipsec"), "b", c.goOnFail, false)
			if err != nil {
				t.Fatal(err)
			}
			tb := datapathtest.Testbed(t, netns.Spec{})
			link, err := dp.Setup(context.Background(), tb)
			if !c.goOnFail {
				if err == nil {
					link.Close(context.Background())
					t.Fatal("setup with a wrong PSK succeeded")
				}
				t.Logf("setup error (expected):\n%v", err)
				for _, want := range []string{"ipsec", "a → b", "AUTHENTICATION_FAILED"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("setup error does not name %q", want)
					}
				}
				ipsecCheckGone(t, tb, nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { link.Close(context.Background()) })
			a, b := tb.LocalSites()[0], tb.LocalSites()[1]
			datapathtest.Serve(t, b, datapathtest.AddrOf(t, link.Target(b, b, 7199)))
			start := time.Now()
			if err := datapathtest.Dial(a, datapathtest.AddrOf(t, link.Target(a, b, 7199)), 5*time.Second); err == nil {
				t.Errorf("wrong PSK: traffic got through after %s", time.Since(start))
			} else {
				t.Logf("wrong PSK: no traffic in %s: %v", time.Since(start).Round(time.Millisecond), err)
			}
			if err := link.Alive(); err != nil {
				t.Errorf("alive: %v", err)
			}
		})
	}
}

// TestIPsecLeavesNothing checks what Setup made while it runs (a charon per
// site with its private /run, a TUN device, 0600 files) and that Close and
// the testbed's Close leave none of it.
func TestIPsecLeavesNothing(t *testing.T) {
	dp := datapathtest.New(t, "ipsec", nil)
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := dp.Setup(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tb.TempDir(), "ipsec")
	var pids []int
	for _, c := range link.Components {
		if c.PID == 0 {
			continue
		}
		pids = append(pids, c.PID)
		mi, err := os.ReadFile("/proc/" + strconv.Itoa(c.PID) + "/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, c.Site, "run") + " /run "
		if !bytes.Contains(mi, []byte(want)) {
			t.Errorf("charon on %s: no %s bind-mounted on /run in its mount namespace", c.Site, want)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("components %+v, want two charons", link.Components)
	}
	if n := len(ipsecCharons(tb.TempDir())); n != 2 {
		t.Errorf("%d charons of this run found in /proc, want 2", n)
	}
	for _, s := range tb.LocalSites() {
		if len(ipsecTUNs(t, s)) == 0 {
			t.Errorf("site %s: no TUN device while running", s.Name())
		}
	}
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".conf") {
			files++
			if st, _ := d.Info(); st.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
			}
		}
		return nil
	})
	if files != 4 {
		t.Errorf("%d config files under %s, want 4", files, dir)
	}
	if err := link.Close(context.Background()); err != nil {
		t.Errorf("link close: %v", err)
	}
	for _, s := range tb.LocalSites() {
		if tuns := ipsecTUNs(t, s); len(tuns) != 0 {
			t.Errorf("site %s: TUN devices %v left after link close", s.Name(), tuns)
		}
	}
	ipsecCheckGone(t, tb, pids)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	ipsecCheckGone(t, tb, pids)
}

// TestIPsecTransportNeedsKernelESP: on a kernel without ESP, transport mode
// (and esp: kernel) are refused with the reason.
func TestIPsecTransportNeedsKernelESP(t *testing.T) {
	datapathtest.RequireRoot(t)
	info, _ := plugins.Datapath("ipsec")
	newDP := func(opts map[string]any) datapath.Datapath {
		dp, err := info.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return dp
	}
	kernel := newDP(map[string]any{"esp": "kernel"})
	err := kernel.(datapath.Checker).Check(context.Background())
	if err == nil {
		t.Skip("this kernel has ESP: transport mode can run here")
	}
	if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_INET_ESP") {
		t.Errorf("esp kernel: %v, want ErrNotSupported naming CONFIG_INET_ESP", err)
	}
	transport := newDP(map[string]any{"mode": "transport"})
	err = transport.(datapath.Checker).Check(context.Background())
	if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "transport mode needs kernel ESP") {
		t.Errorf("transport: %v, want ErrNotSupported saying transport needs kernel ESP", err)
	}
	tb := datapathtest.Testbed(t, netns.Spec{})
	if link, err := transport.Setup(context.Background(), tb); err == nil {
		link.Close(context.Background())
		t.Error("transport setup succeeded on a kernel without ESP")
	} else {
		t.Logf("transport: %v", err)
	}
	ipsecCheckGone(t, tb, nil)
}

// TestIPsecDaemonFailure: a charon that cannot start is reported with the
// datapath, the site and its last log lines, and nothing is left.
func TestIPsecDaemonFailure(t *testing.T) {
	datapathtest.New(t, "ipsec", nil)
	dp, err := datapath.IPsecForTest(datapathtest.Defaults(t, "ipsec"), "", false, true)
	if err != nil {
		t.Fatal(err)
	}
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := dp.Setup(context.Background(), tb)
	if err == nil {
		link.Close(context.Background())
		t.Fatal("setup with a broken strongswan.conf succeeded")
	}
	t.Logf("setup error (expected):\n%v", err)
	for _, want := range []string{"ipsec", "charon", "site a", "last log lines"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q", want)
		}
	}
	ipsecCheckGone(t, tb, nil)
}

// ipsecCheckGone fails t if any charon of tb's run, one of pids still
// running charon, a mount under tb's temp dir or an ipsec file remains.
func ipsecCheckGone(t *testing.T, tb *netns.Testbed, pids []int) {
	t.Helper()
	if ps := ipsecCharons(tb.TempDir()); len(ps) != 0 {
		t.Errorf("charons of this run still running: %v", ps)
	}
	for _, pid := range pids {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && filepath.Base(exe) == "charon" {
			t.Errorf("charon %d still running", pid)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mi, []byte(tb.TempDir())) {
		t.Errorf("a mount under %s is left", tb.TempDir())
	}
	if _, err := os.Stat(filepath.Join(tb.TempDir(), "ipsec")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ipsec files left in %s (%v)", tb.TempDir(), err)
	}
}

// ipsecCharons returns the PIDs of charons started with a configuration
// under dir.
func ipsecCharons(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink("/proc/" + e.Name() + "/exe")
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if filepath.Base(exe) == "charon" && bytes.Contains(env, []byte("STRONGSWAN_CONF="+dir+"/")) {
			out = append(out, pid)
		}
	}
	return out
}

// ipsecTUNs lists the TUN devices in site.
func ipsecTUNs(t *testing.T, s *netns.Site) []string {
	t.Helper()
	links, err := s.Netlink().LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if _, ok := l.(*netlink.Tuntap); ok {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}
