package scenario

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
)

func TestParseLimits(t *testing.T) {
	const src = `
datapaths: [native]
workloads:
  - type: stream
    message_size: [1k, 64k]
limits:
  relay: {cpu: [0.25, 0.5, 1, 2]}
  wireguard-go@a:
    cpu: 1.5
`
	s, err := Parse("limits.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Limit{"relay": {CPU: []float64{0.25, 0.5, 1, 2}}, "wireguard-go@a": {CPU: []float64{1.5}}}
	if !reflect.DeepEqual(s.Limits, want) {
		t.Errorf("limits %+v, want %+v", s.Limits, want)
	}
	if err := s.Validate(fakeCatalog{}); err != nil {
		t.Errorf("Validate: %v", err)
	}
	var keys []string
	for _, p := range s.Points() {
		keys = append(keys, p.Workload+" "+p.Params.Key())
	}
	// The limits vary fastest, each list in file order; every point carries
	// every key, a single value too.
	wantKeys := []string{
		"stream limit.relay.cpu=0.25 limit.wireguard-go@a.cpu=1.5 message_size=1000 streams=1",
		"stream limit.relay.cpu=0.5 limit.wireguard-go@a.cpu=1.5 message_size=1000 streams=1",
		"stream limit.relay.cpu=1 limit.wireguard-go@a.cpu=1.5 message_size=1000 streams=1",
		"stream limit.relay.cpu=2 limit.wireguard-go@a.cpu=1.5 message_size=1000 streams=1",
		"stream limit.relay.cpu=0.25 limit.wireguard-go@a.cpu=1.5 message_size=64000 streams=1",
		"stream limit.relay.cpu=0.5 limit.wireguard-go@a.cpu=1.5 message_size=64000 streams=1",
		"stream limit.relay.cpu=1 limit.wireguard-go@a.cpu=1.5 message_size=64000 streams=1",
		"stream limit.relay.cpu=2 limit.wireguard-go@a.cpu=1.5 message_size=64000 streams=1",
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(wantKeys, "\n"))
	}
	p := s.Points()[2].Params
	if v, ok := p[results.CPULimitParam("relay")].(float64); !ok || v != 1 {
		t.Errorf("relay limit param %#v, want float64 1", p[results.CPULimitParam("relay")])
	}
	// A record read back from JSON has the same trial key.
	b, _ := json.Marshal(p)
	var back results.Params
	if err := json.Unmarshal(b, &back); err != nil || back.Key() != p.Key() {
		t.Errorf("JSON round trip: %q, want %q (%v)", back.Key(), p.Key(), err)
	}
	// The points of the same workload stay apart in records.
	seen := map[string]bool{}
	for _, pt := range s.Points() {
		k := results.TrialKey("native", pt.Workload, pt.Params, 0)
		if seen[k] {
			t.Errorf("trial key %s twice", k)
		}
		seen[k] = true
	}
}

func TestNoLimitsNoParams(t *testing.T) {
	s := load(t, applyBase)
	for _, p := range s.Points() {
		for k := range p.Params {
			if strings.HasPrefix(k, "limit.") {
				t.Errorf("point %s has a limit parameter", p.Params.Key())
			}
		}
	}
}

func TestValidateLimits(t *testing.T) {
	s := load(t, applyBase)
	s.Limits = map[string]Limit{"relay": {CPU: []float64{0.5, -1}}, "tunnel": {}}
	err := s.Validate(fakeCatalog{})
	want := "scenario test.yaml: limits.relay.cpu[1]: must be > 0, got -1\n" +
		`scenario test.yaml: limits.tunnel: missing required key "cpu"`
	if errText(err) != want {
		t.Errorf("Validate:\n%v\nwant:\n%s", err, want)
	}
}

func TestLimitsMatrixTooBig(t *testing.T) {
	s := load(t, "datapaths: [native]\nworkloads: [{type: stream, message_size: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}]\n")
	cpu := make([]float64, 1001)
	for i := range cpu {
		cpu[i] = float64(i + 1)
	}
	s.Limits = map[string]Limit{"relay": {CPU: cpu}}
	if err := s.Validate(fakeCatalog{}); err == nil || !strings.Contains(err.Error(), "matrix has more than") {
		t.Errorf("10 × 1001 points: %v, want too big", err)
	}
}

func TestCPULimitParam(t *testing.T) {
	for _, key := range []string{"relay", "wireguard-go@a", "a.b"} {
		if got, ok := results.ParseCPULimitParam(results.CPULimitParam(key)); !ok || got != key {
			t.Errorf("round trip of %q: %q, %v", key, got, ok)
		}
	}
	for _, name := range []string{"message_size", "limit.cpu", "limit..cpu", "limit.relay.memory"} {
		if k, ok := results.ParseCPULimitParam(name); ok {
			t.Errorf("%q parsed as the limit of %q", name, k)
		}
	}
}
