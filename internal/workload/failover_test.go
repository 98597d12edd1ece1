package workload

import (
	"testing"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
)

// TestFailoverFigures: the outage runs from b's last answer to c's first
// after it; failures before the first answer are not counted; a run
// where c never answers after is an error.
func TestFailoverFigures(t *testing.T) {
	ms := int64(1e6)
	run := agent.FailoverRun{Attempts: []agent.FailoverAttempt{
		{StartNS: 0, EndNS: 1 * ms, Error: "refused"}, // route coming up
		{StartNS: 1 * ms, EndNS: 2 * ms, Site: "b"},
		{StartNS: 2 * ms, EndNS: 3 * ms, Site: "b"},
		{StartNS: 3 * ms, EndNS: 4 * ms, Error: "reset"},
		{StartNS: 4 * ms, EndNS: 5 * ms, Error: "reset"},
		{StartNS: 5 * ms, EndNS: 13 * ms, Site: "c"},
		{StartNS: 6 * ms, EndNS: 9 * ms, Site: "c"},
	}}
	m, err := failoverFigures(run, "b", 3*ms)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		results.OutageSeconds: 0.006, results.RecoverySeconds: 0.006, results.FailedTransactions: 2,
		results.AnsweredBy + "{b}": 2, results.AnsweredBy + "{c}": 2,
	}
	for k, v := range want {
		if d := m[k] - v; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	run.Attempts = run.Attempts[:5]
	if _, err := failoverFigures(run, "b", 3*ms); err == nil {
		t.Error("no answer from c after the failure: want an error")
	}
}

// TestSiteInUse: the site in use is the probe's last switch line; a torn
// last line or the final run line do not count.
func TestSiteInUse(t *testing.T) {
	first := agent.FailoverSwitch{Site: "b", AtNS: 10}
	out := `{"site":"b","at_unix_ns":10}
{"site":"c","at_unix_ns":20}
{"site":"b","at_unix_ns":30}
{"attempts":[]}
{"site":"c","at_`
	if got := siteInUse(out, first); got.Site != "b" || got.AtNS != 30 {
		t.Errorf("siteInUse = %+v, want b at 30", got)
	}
	if got := siteInUse("", first); got != first {
		t.Errorf("no lines: %+v, want the first", got)
	}
}
