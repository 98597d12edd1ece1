package datapath_test

import (
	"context"
	"errors"
	"maps"
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
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// socatOptions returns the options of the socat entry of the shipped
// example, so the test proves the example works, not only that it parses.
func socatOptions(t *testing.T) map[string]any {
	t.Helper()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Skip("socat not installed (Debian package socat)")
	}
	s, err := scenario.Load("../../examples/custom-socat.yaml", plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Datapaths {
		if d.Name == "custom" {
			return maps.Clone(d.Options)
		}
	}
	t.Fatal("examples/custom-socat.yaml has no custom datapath")
	return nil
}

// TestCustomSocatCarriesAll runs stream, rr and crr through the socat relay
// of examples/custom-socat.yaml and checks that teardown leaves no socat.
func TestCustomSocatCarriesAll(t *testing.T) {
	opts := socatOptions(t)
	tb, link := datapathtest.Setup(t, netns.Spec{}, "custom", opts)
	sites := tb.LocalSites()
	if got := link.Target(sites[0], sites[1], 7100).String(); got != "198.18.1.2:17100" {
		t.Errorf("target a→b = %s, want 198.18.1.2:17100 (the relay in a)", got)
	}
	for _, c := range link.Components {
		if c.Role != "relay" || c.PID == 0 || !strings.HasPrefix(c.Name, "socat@") {
			t.Errorf("component %+v, want a socat relay with a PID", c)
		}
	}
	if len(link.Components) != 2 {
		t.Errorf("components %+v, want one socat per site", link.Components)
	}
	datapathtest.CarriesAll(t, tb, link)
	if err := link.Alive(); err != nil {
		t.Errorf("alive after traffic: %v", err)
	}
	closeAndCheck(t, tb, link, "socat")
}

// TestCustomDetached uses up that exits once socat runs detached (setsid -f)
// and a down command: spanperf finds socat by name, carries traffic, and
// teardown runs down and leaves nothing behind.
func TestCustomDetached(t *testing.T) {
	opts := socatOptions(t)
	opts["up"] = "setsid -f socat TCP-LISTEN:17100,bind={site_addr},reuseaddr,fork TCP:{peer_addr}:{port} && echo up > {tmp}/state"
	marks := t.TempDir()
	opts["down"] = `test "$(cat $SPANPERF_TMP/state)" = up && echo down > ` + marks + `/$SPANPERF_SITE`
	tb, link := datapathtest.Setup(t, netns.Spec{}, "custom", opts)
	if len(link.Components) != 2 || link.Components[0].PID == 0 {
		t.Fatalf("components %+v, want the two detached socats", link.Components)
	}
	st := datapathtest.MustRun(t, tb, link, "rr", results.Params{"request_size": int64(64), "response_size": int64(64), "concurrency": int64(1)}, 500*time.Millisecond, 100*time.Millisecond)
	if st.Metrics[results.TransactionsPerS] <= 0 {
		t.Errorf("rr through detached socat: %v", st.Metrics)
	}
	for _, c := range link.Components {
		if _, err := os.Stat("/proc/" + strconv.Itoa(c.PID)); err != nil {
			t.Errorf("component %s not running", c.Name)
		}
	}
	closeAndCheck(t, tb, link, "socat")
	if ran, _ := filepath.Glob(filepath.Join(marks, "*")); len(ran) != 2 {
		t.Errorf("down ran in %d sites, want 2: %v", len(ran), ran)
	}
}

// TestCustomUpFails checks that a failing up is reported with the
// datapath, the site and the command's stderr, and that nothing is left.
func TestCustomUpFails(t *testing.T) {
	opts := datapathtest.Defaults(t, "custom")
	opts["up"] = `if [ "$SPANPERF_SITE" = b ]; then echo "no licence for router on $SPANPERF_SITE" >&2; exit 3; fi; exec sleep 60`
	opts["components"] = "sleep"
	dp := datapathtest.New(t, "custom", opts)
	tb := datapathtest.Testbed(t, netns.Spec{})
	link, err := dp.Setup(context.Background(), tb)
	if err == nil {
		link.Close(context.Background())
		t.Fatal("setup succeeded, want the error of up on site b")
	}
	msg := err.Error()
	t.Logf("setup error: %v", err)
	for _, want := range []string{"custom", "site b", "exit status 3", "no licence for router on b"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	for _, s := range tb.LocalSites() {
		if left := inNetns(t, s, "sleep"); len(left) > 0 {
			t.Errorf("site %s: sleep %v left after failed setup", s.Name(), left)
		}
	}
}

// TestCustomBadTarget rejects a target that is not IP:port before running
// anything.
func TestCustomBadTarget(t *testing.T) {
	opts := datapathtest.Defaults(t, "custom")
	opts["up"] = "exec sleep 60"
	opts["target"] = "{peer}.example:{port}"
	dp := datapathtest.New(t, "custom", opts)
	tb := datapathtest.Testbed(t, netns.Spec{})
	_, err := dp.Setup(context.Background(), tb)
	if err == nil || !strings.Contains(err.Error(), `.example:7100" from a to`) {
		t.Fatalf("setup error %v, want the expanded bad target", err)
	}
}

// TestCustomNoUpSkips: without up (the registry's defaults) the datapath
// says it cannot run, rather than measuring nothing.
func TestCustomNoUpSkips(t *testing.T) {
	info, _ := plugins.Datapath("custom")
	dp, err := info.New(datapathtest.Defaults(t, "custom"))
	if err != nil {
		t.Fatal(err)
	}
	err = dp.(datapath.Checker).Check(context.Background())
	if !errors.Is(err, datapath.ErrUnconfigured) || !strings.Contains(err.Error(), "no up command") {
		t.Errorf("Check without up = %v, want ErrUnconfigured: no up command", err)
	}
}

// closeAndCheck closes link and fails if a process named comm still runs in
// a site or the datapath's directories remain.
func closeAndCheck(t *testing.T, tb *netns.Testbed, link *datapath.Link, comm string) {
	t.Helper()
	if err := link.Close(context.Background()); err != nil {
		t.Errorf("link close: %v", err)
	}
	for _, s := range tb.LocalSites() {
		if left := inNetns(t, s, comm); len(left) > 0 {
			t.Errorf("site %s: %s %v still running after close", s.Name(), comm, left)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tb.TempDir(), "custom-*")); len(left) > 0 {
		t.Errorf("left after close: %v", left)
	}
}

// inNetns lists the PIDs of processes named comm in site's namespace.
func inNetns(t *testing.T, s *netns.Site, comm string) []int {
	t.Helper()
	want, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Do(func() error {
		want, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/net")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if strings.TrimSpace(string(b)) == comm && ns == want && !strings.Contains(string(stat), ") Z ") {
			out = append(out, pid)
		}
	}
	return out
}
