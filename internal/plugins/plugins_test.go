package plugins_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

func TestMain(m *testing.M) {
	agent.RunIfChild()
	os.Exit(m.Run())
}

// TestDatapathsCarryWorkloads runs stream, rr and crr through every
// registered datapath this machine can run. The Kubernetes exposure
// adapters run only on Kubernetes sites; datapath/kubedp tests them
// against the real clusters.
func TestDatapathsCarryWorkloads(t *testing.T) {
	for _, d := range plugins.Datapaths() {
		if d.Kube {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, d.Name, nil)
			checkDeclared(t, d.Name, nil, len(tb.Sites()), link.Components)
			datapathtest.CarriesAll(t, tb, link)
		})
	}
}

// TestShapedStreamKnownAnswer shapes the underlay to R with tbf and checks
// that stream measures between 0.90 R and 1.01 R.
func TestShapedStreamKnownAnswer(t *testing.T) {
	const rate = 200e6
	tb, link := datapathtest.Setup(t, netns.Spec{RateBPS: rate}, "native", nil)
	st := datapathtest.MustRun(t, tb, link, "stream", results.Params{"message_size": int64(131072), "streams": int64(1)}, 3*time.Second, time.Second)
	got := st.Metrics[results.ThroughputBPS]
	t.Logf("shaped to %.0f Mbit/s, measured %.1f Mbit/s (%.3f R)", rate/1e6, got/1e6, got/rate)
	if got < 0.90*rate || got > 1.01*rate {
		t.Errorf("measured %.1f Mbit/s, want %.0f–%.0f", got/1e6, 0.90*rate/1e6, 1.01*rate/1e6)
	}
}

// checkDeclared fails unless every component a datapath built is among
// those its registry entry declares (what the scenario's limits are checked
// against at parse time), with the same role, a process where it has one.
func checkDeclared(t *testing.T, name string, opts map[string]any, sites int, built []results.Component) {
	t.Helper()
	declared := plugins.Catalog{}.Components(name, opts, sites)
	for _, c := range built {
		ok := slices.ContainsFunc(declared, func(d scenario.Component) bool {
			return (d.Name == c.Name || d.Name == "" && d.Process) && d.Role == c.Role && d.Process == (c.PID > 0)
		})
		if !ok {
			t.Errorf("%s built component %s (role %s, pid %d), which its Info.Components does not declare: %+v", name, c.Name, c.Role, c.PID, declared)
		}
	}
}

// TestLimitWithoutComponent: the README's old scenario example, native and
// vxlan under a relay limit, failed every trial at run time; the real
// catalog now rejects it at parse time with file, line and key, and accepts
// a relay limit beside a native baseline.
func TestLimitWithoutComponent(t *testing.T) {
	_, err := scenario.Parse("quick.yaml", []byte("datapaths: [native, vxlan]\nworkloads: [{type: rr}]\nlimits: {relay: {cpu: [0.5, 1]}}\n"), plugins.Catalog{})
	const want = "quick.yaml:3: limits.relay: names no component or role of the datapaths (native: kernel (kernel); vxlan: kernel (kernel))"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	s, err := scenario.Parse("sizing.yaml", []byte("datapaths: [native, mtls-relay]\nworkloads: [{type: rr}]\nlimits: {relay: {cpu: [0.5, 1]}, haproxy@b: {cpu: 2}}\n"), plugins.Catalog{})
	if err != nil {
		t.Fatal(err)
	}
	if n, m := len(s.PointsOf("native")), len(s.PointsOf("mtls-relay")); n != 1 || m != 2 {
		t.Errorf("native runs %d points, mtls-relay %d; want 1 and 2", n, m)
	}
}
