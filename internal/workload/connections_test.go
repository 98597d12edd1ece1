package workload_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/workload"
)

// TestConnectionsKeepaliveBound: more keepalives per second than a hold
// allows is refused before anything is built, naming keepalive; the trial
// limit covers opening at the connect rate.
func TestConnectionsKeepaliveBound(t *testing.T) {
	w := workload.ConnectionsInfo().New()
	st := w.(workload.SetupTimer)
	built := false
	env := workload.SetupEnv{
		Env: workload.Env{Params: results.Params{"count": int64(100000), "connect_rate": 1000.0, "keepalive": "1s"}},
		Build: func(context.Context) (*workload.Built, error) {
			built = true
			return nil, context.Canceled
		},
	}
	_, err := st.TimeSetup(context.Background(), env)
	if err == nil || !strings.Contains(err.Error(), "raise keepalive") || built {
		t.Errorf("100000 connections every 1s: %v (built %v), want an error naming keepalive before setup", err, built)
	}
	env.Duration, env.Warmup = 2*time.Second, time.Second
	// Opening may go as slowly as 100/s before the trial gives up.
	if l := w.(workload.TrialLimiter).TrialLimit(env.Env); l < 1000*time.Second+3*time.Second {
		t.Errorf("trial limit %v for 100000 connections, want at least 1003 s", l)
	}
}
