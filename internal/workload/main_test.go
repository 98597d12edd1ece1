package workload_test

import (
	"os"
	"testing"

	"github.com/spanperf/spanperf/internal/agent"
)

// TestMain lets the test binary act as the agent that workloads start in sites.
func TestMain(m *testing.M) {
	agent.RunIfChild()
	os.Exit(m.Run())
}
