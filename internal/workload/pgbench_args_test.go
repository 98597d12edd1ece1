package workload

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// query_mode reaches pgbench as -M; pgbench's own default is simple, and a
// mode pgbench lacks is refused before anything starts.
func TestPgbenchQueryMode(t *testing.T) {
	for _, tc := range []struct {
		params results.Params
		want   string
	}{
		{results.Params{}, "simple"},
		{results.Params{"query_mode": "prepared", "rate": 100.0}, "prepared"},
		{results.Params{"query_mode": "extended"}, "extended"},
	} {
		env := Env{Params: tc.params, Target: testbed.Target{Host: "198.18.0.2", Port: 5432}, Duration: time.Second}
		r, err := newPgbenchRun(env)
		if err != nil {
			t.Fatal(err)
		}
		_, args := r.clientArgs(env, "/tmp/tx")
		i := slices.Index(args, "-M")
		if i < 0 || i+1 >= len(args) || args[i+1] != tc.want {
			t.Errorf("%v: args %q, want -M %s", tc.params, args, tc.want)
		}
	}
	_, err := newPgbenchRun(Env{Params: results.Params{"query_mode": "binary"}})
	if err == nil || !strings.Contains(err.Error(), `query_mode "binary"`) {
		t.Errorf("query_mode binary: err %v, want one naming it", err)
	}
}
