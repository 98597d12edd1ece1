package plugins_test

import (
	"os"
	"path/filepath"
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
// registered datapath this machine can run.
func TestDatapathsCarryWorkloads(t *testing.T) {
	for _, d := range plugins.Datapaths() {
		t.Run(d.Name, func(t *testing.T) {
			tb, link := datapathtest.Setup(t, netns.Spec{}, d.Name, nil)
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

// TestExamplesParse loads every shipped scenario with the real catalog.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		s, err := scenario.Load(f, plugins.Catalog{})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Points()) == 0 {
			t.Errorf("%s: no workload points", f)
		}
	}
}
