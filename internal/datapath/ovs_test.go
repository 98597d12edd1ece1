package datapath_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func TestOVSGeneveCarriesAll(t *testing.T) { testOVS(t, "ovs-geneve", "198.19.4.2:7100") }

func TestOVSVXLANCarriesAll(t *testing.T) { testOVS(t, "ovs-vxlan", "198.19.3.2:7100") }

// testOVS runs stream, rr and crr through an OVS overlay, then checks that
// teardown stops every daemon of the run, removes its files and devices,
// and gives the sites their underlay back.
func testOVS(t *testing.T, name, target string) {
	tb, link := datapathtest.Setup(t, netns.Spec{}, name, nil)
	sites := tb.LocalSites()
	if got := link.Target(sites[0], sites[1], 7100).String(); got != target {
		t.Errorf("target a→b = %s, want %s", got, target)
	}
	var pids []int
	for _, c := range link.Components {
		if c.Role == "switch" {
			if !strings.HasPrefix(c.Name, "ovs-vswitchd@") || c.PID == 0 {
				t.Errorf("switch component %+v, want ovs-vswitchd with a PID", c)
			}
			pids = append(pids, c.PID)
		}
	}
	if len(pids) != 2 {
		t.Errorf("components %+v, want one ovs-vswitchd per site", link.Components)
	}
	datapathtest.CarriesAll(t, tb, link)
	if err := link.Alive(); err != nil {
		t.Errorf("alive after traffic: %v", err)
	}

	if err := link.Close(context.Background()); err != nil {
		t.Errorf("link close: %v", err)
	}
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && !zombie(pid) {
			t.Errorf("ovs-vswitchd pid %d still running after close", pid)
		}
	}
	if left := ovsDaemonsUnder(tb.TempDir()); len(left) > 0 {
		t.Errorf("OVS daemons of this run still running: %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(tb.TempDir(), "ovs-*")); len(left) > 0 {
		t.Errorf("left after close: %v", left)
	}
	for _, s := range sites {
		for _, dev := range []string{"br-int", "br-phy", "ovs-netdev", "ovs-system"} {
			if _, err := s.Netlink().LinkByName(dev); err == nil {
				t.Errorf("site %s: device %s left after close", s.Name(), dev)
			}
		}
	}
	// The underlay is back on eth0: native traffic flows again.
	native, err := datapath.Native{}.Setup(context.Background(), tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := datapathtest.Run(tb, native, "rr", results.Params{"request_size": int64(64), "response_size": int64(64), "concurrency": int64(1)}, 300*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Errorf("underlay after close: %v", err)
	}
}

// TestOVSSystemCarriesAll runs the kernel datapath where this machine has
// the openvswitch module (it skips, saying why, elsewhere).
func TestOVSSystemCarriesAll(t *testing.T) {
	opts := datapathtest.Defaults(t, "ovs-vxlan")
	opts["datapath"] = "system"
	tb, link := datapathtest.Setup(t, netns.Spec{}, "ovs-vxlan", opts)
	datapathtest.CarriesAll(t, tb, link)
}

// TestOVSSystemReason checks the reason Check gives for the kernel datapath
// on a machine without the openvswitch module.
func TestOVSSystemReason(t *testing.T) {
	datapathtest.RequireRoot(t)
	if _, err := os.Stat("/sys/module/openvswitch"); err == nil {
		t.Skip("this machine has the openvswitch module")
	}
	if exec.Command("modprobe", "-n", "openvswitch").Run() == nil {
		t.Skip("the openvswitch module can be loaded here")
	}
	opts := datapathtest.Defaults(t, "ovs-geneve")
	opts["datapath"] = "system"
	info, _ := plugins.Datapath("ovs-geneve")
	dp, err := info.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = dp.(datapath.Checker).Check(context.Background())
	if !errors.Is(err, datapath.ErrNotSupported) || !strings.Contains(err.Error(), "openvswitch kernel module") {
		t.Errorf("Check = %v, want not supported: openvswitch kernel module", err)
	}
}

// ovsDaemonsUnder lists OVS daemons whose command line names dir.
func ovsDaemonsUnder(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || zombie(pid) {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.HasPrefix(cmd, "ovs") && strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

func zombie(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z")
}
