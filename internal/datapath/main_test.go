package datapath_test

import (
	"os"
	"testing"

	"github.com/spanperf/spanperf/internal/agent"
)

func TestMain(m *testing.M) {
	agent.RunIfChild()
	os.Exit(m.Run())
}
