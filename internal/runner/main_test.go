package runner_test

import (
	"os"
	"testing"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/probe/probetest"
)

// TestMain lets the test binary act as the agent that runs start in sites.
func TestMain(m *testing.M) {
	agent.RunIfChild()
	probetest.RunIfHog()
	os.Exit(m.Run())
}
