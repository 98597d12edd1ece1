package datapath_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func kernelHasWireGuard() bool {
	_, err := os.Stat("/sys/module/wireguard")
	return err == nil
}

// userspace is the default options with wireguard-go asked for, which auto
// would not pick on a host with the WireGuard module: the tests of
// wireguard-go then run everywhere.
func userspace(t *testing.T) map[string]any {
	opts := datapathtest.Defaults(t, "wireguard")
	opts["implementation"] = datapath.WireGuardUserspace
	return opts
}

func TestWireGuardOptions(t *testing.T) {
	info, ok := plugins.Datapath("wireguard")
	if !ok {
		t.Fatal("wireguard not registered")
	}
	for _, tc := range []struct {
		opts map[string]any
		ok   bool
	}{
		{datapathtest.Defaults(t, "wireguard"), true},
		{map[string]any{"implementation": "userspace", "listen_port": int64(4500), "mtu": int64(1400)}, true},
		{map[string]any{"implementation": "kernel"}, true},
		{map[string]any{"implementation": "boringtun"}, false},
		{map[string]any{"listen_port": int64(70000)}, false},
		{map[string]any{"mtu": int64(100)}, false},
	} {
		_, err := info.New(tc.opts)
		if (err == nil) != tc.ok {
			t.Errorf("New(%v) = %v, want ok %v", tc.opts, err, tc.ok)
		}
	}
}

func TestWireGuardInterfaceNames(t *testing.T) {
	seen := map[string]bool{}
	for _, run := range []string{"a1b2c3", "d4e5f6", "a-much-longer-run-id"} {
		for i := range 200 {
			n := datapath.WireGuardInterface(run, netns.SiteName(i))
			if len(n) > 15 {
				t.Errorf("%s: %d characters, Linux allows 15", n, len(n))
			}
			if seen[n] {
				t.Errorf("%s made twice", n)
			}
			seen[n] = true
		}
	}
	if n := datapath.WireGuardInterface("a1b2c3", "b"); n != "wg-a1b2c3-b" {
		t.Errorf("interface %s, want wg-a1b2c3-b", n)
	}
}

// On this machine the kernel has no WireGuard: asking for it must say so,
// and auto must fall back to wireguard-go.
func TestWireGuardKernelUnsupported(t *testing.T) {
	datapathtest.RequireRoot(t)
	err := (&datapath.WireGuard{Implementation: datapath.WireGuardKernel}).Check(context.Background())
	if kernelHasWireGuard() {
		if err != nil {
			t.Errorf("kernel has the wireguard module, Check says %v", err)
		}
		t.Skip("kernel has the wireguard module: nothing unsupported to report")
	}
	if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_WIREGUARD") {
		t.Errorf("implementation kernel: Check = %v, want ErrNotSupported naming CONFIG_WIREGUARD", err)
	}
	if err := (&datapath.WireGuard{Implementation: datapath.WireGuardAuto}).Check(context.Background()); err != nil {
		t.Errorf("implementation auto: Check = %v, want wireguard-go to stand in", err)
	}
}

// TestWireGuardCarriesAll runs wireguard-go everywhere, and the kernel's
// WireGuard where the kernel has it.
func TestWireGuardCarriesAll(t *testing.T) {
	t.Run("userspace", func(t *testing.T) {
		tb, link := datapathtest.Setup(t, netns.Spec{}, "wireguard", userspace(t))
		if len(link.Components) != 2 {
			t.Fatalf("components %+v, want one wireguard-go per site", link.Components)
		}
		for _, c := range link.Components {
			if !strings.HasPrefix(c.Name, "wireguard-go@") || c.Role != "tunnel" || c.PID == 0 {
				t.Errorf("component %+v, want wireguard-go, role tunnel, with a PID", c)
			}
		}
		if got := datapathtest.AddrOf(t, link.Target(tb.Sites()[0], tb.Sites()[1], 7100)); got != netip.MustParseAddrPort("198.19.1.2:7100") {
			t.Errorf("target %s, want the overlay address 198.19.1.2:7100", got)
		}
		datapathtest.CarriesAll(t, tb, link)
	})
	t.Run("kernel", func(t *testing.T) {
		opts := userspace(t)
		opts["implementation"] = datapath.WireGuardKernel
		tb, link := datapathtest.Setup(t, netns.Spec{}, "wireguard", opts) // skips without the module
		if len(link.Components) != 1 || link.Components[0].PID != 0 {
			t.Errorf("components %+v, want the kernel's share only", link.Components)
		}
		datapathtest.CarriesAll(t, tb, link)
	})
}

// Every site reaches every other through the mesh.
func TestWireGuardMesh(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{Sites: 3}, "wireguard", map[string]any{"implementation": "auto", "listen_port": int64(4500), "mtu": int64(0)})
	datapathtest.AllReach(t, tb, link, 9000, 3*time.Second)
}

// A peer configured with the wrong public key carries nothing; with the
// right one it does.
func TestWireGuardWrongKey(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "wireguard", userspace(t))
	a, b := tb.LocalSites()[0], tb.LocalSites()[1]
	run := tb.Spec().Run
	aDev, bDev := datapath.WireGuardInterface(run, "a"), datapath.WireGuardInterface(run, "b")
	target := datapathtest.AddrOf(t, link.Target(a, b, 9000))
	datapathtest.Serve(t, b, target)

	var right *wgtypes.Peer
	wgWith(t, b, func(c *wgctrl.Client) error {
		d, err := c.Device(bDev)
		if err == nil {
			right = &wgtypes.Peer{PublicKey: d.PublicKey}
		}
		return err
	})
	var peer wgtypes.Peer
	wgWith(t, a, func(c *wgctrl.Client) error {
		d, err := c.Device(aDev)
		if err == nil && len(d.Peers) != 1 {
			t.Fatalf("site a has %d peers, want 1", len(d.Peers))
		}
		if err == nil {
			peer = d.Peers[0]
		}
		return err
	})
	if peer.PublicKey != right.PublicKey {
		t.Fatalf("site a's peer key %s, want site b's %s", peer.PublicKey, right.PublicKey)
	}
	wrong, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	wgSetPeerKey(t, a, aDev, peer, wrong.PublicKey())
	start := time.Now()
	err = datapathtest.Dial(a, target, 2*time.Second)
	var nerr net.Error
	if err == nil || !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("dial through a peer with the wrong key: %v, want a timeout", err)
	}
	t.Logf("wrong key: %v after %s", err, time.Since(start).Round(time.Millisecond))

	wgSetPeerKey(t, a, aDev, peer, right.PublicKey)
	if err := datapathtest.Dial(a, target, 3*time.Second); err != nil {
		t.Fatalf("dial with the right key restored: %v", err)
	}
}

// After link.Close and tb.Close nothing of the datapath remains: no
// wireguard-go, no TUN device, no control socket, no key file.
func TestWireGuardLeavesNothing(t *testing.T) {
	dp := datapathtest.New(t, "wireguard", userspace(t))
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := dp.Setup(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	run := tb.Spec().Run
	var pids []int
	for _, c := range link.Components {
		pids = append(pids, c.PID)
	}
	var devs, socks []string
	for _, s := range tb.LocalSites() {
		dev := datapath.WireGuardInterface(run, s.Name())
		devs = append(devs, dev)
		socks = append(socks, datapath.WireGuardSocket(dev))
	}
	ents, err := testbed.ReadLedger(filepath.Join(testbed.LedgerDir, run+".ledger"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sock := range socks {
		if _, err := os.Stat(sock); err != nil {
			t.Errorf("control socket while up: %v", err)
		}
		found := false
		for _, e := range ents {
			found = found || (e.Kind == testbed.KindPath && e.Path == sock)
		}
		if !found {
			t.Errorf("ledger does not record %s", sock)
		}
	}
	filepath.WalkDir(tb.TempDir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file %s written while up: keys must not be", p)
		}
		return nil
	})
	if err := datapathtest.Dial(tb.LocalSites()[0], datapathtest.AddrOf(t, link.Target(nil, tb.Sites()[1], 9)), 3*time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("dial to a closed port through the tunnel: %v, want connection refused (the peer answered)", err)
	}

	if err := link.Close(context.Background()); err != nil {
		t.Fatalf("link close: %v", err)
	}
	for i, s := range tb.LocalSites() {
		if _, err := s.Netlink().LinkByName(devs[i]); err == nil {
			t.Errorf("device %s still in site %s after link close", devs[i], s.Name())
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatalf("testbed close: %v", err)
	}
	for _, pid := range pids {
		if testbed.Alive(pid, 0) {
			t.Errorf("wireguard-go pid %d still running", pid)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		for _, dev := range devs {
			if strings.Contains(string(cmd), "wireguard-go") && strings.Contains(string(cmd), dev) {
				t.Errorf("process %s still runs %q", p.Name(), strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
	}
	for _, sock := range socks {
		if _, err := os.Lstat(sock); err == nil {
			t.Errorf("%s left behind", sock)
		}
	}
	if _, err := os.Stat(tb.TempDir()); err == nil {
		t.Errorf("temp dir %s left behind", tb.TempDir())
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		for _, dev := range devs {
			if l.Name() == dev {
				t.Errorf("device %s left in the host namespace", dev)
			}
		}
	}
}

// wgWith runs fn with a wgctrl client opened inside site s.
func wgWith(t *testing.T, s *netns.Site, fn func(*wgctrl.Client) error) {
	t.Helper()
	err := s.Do(func() error {
		c, err := wgctrl.New()
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(c)
	})
	if err != nil {
		t.Fatalf("wgctrl in site %s: %v", s.Name(), err)
	}
}

// wgSetPeerKey replaces dev's only peer with old's endpoint and allowed IPs
// under public key key.
func wgSetPeerKey(t *testing.T, s *netns.Site, dev string, old wgtypes.Peer, key wgtypes.Key) {
	t.Helper()
	wgWith(t, s, func(c *wgctrl.Client) error {
		return c.ConfigureDevice(dev, wgtypes.Config{
			ReplacePeers: true,
			Peers: []wgtypes.PeerConfig{{
				PublicKey:         key,
				Endpoint:          old.Endpoint,
				ReplaceAllowedIPs: true,
				AllowedIPs:        old.AllowedIPs,
			}},
		})
	})
}

// A wireguard-go that dies is reported by Alive, and Close still removes
// the control socket it leaves behind.
func TestWireGuardDaemonDeath(t *testing.T) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, "wireguard", userspace(t))
	if err := link.Alive(); err != nil {
		t.Fatalf("alive after setup: %v", err)
	}
	c := link.Components[0]
	if err := syscall.Kill(c.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 100 {
		if err = link.Alive(); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "wireguard-go") || !strings.Contains(err.Error(), "site "+c.Site) {
		t.Errorf("alive after SIGKILL: %v, want an error naming wireguard-go and site %s", err, c.Site)
	}
	sock := datapath.WireGuardSocket(datapath.WireGuardInterface(tb.Spec().Run, c.Site))
	if err := link.Close(context.Background()); err != nil {
		t.Errorf("link close: %v", err)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("%s left behind by a killed wireguard-go", sock)
	}
}
