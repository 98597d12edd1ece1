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

// componentCatalog is fakeCatalog plus a datapath "relay" with a process
// haproxy@SITE (role relay) in each site, and declared components: the
// kernel for the others.
type componentCatalog struct{ fakeCatalog }

var _ ComponentLister = componentCatalog{}

func (c componentCatalog) DatapathFields(name string) ([]Field, bool) {
	if name == "relay" {
		return nil, true
	}
	return c.fakeCatalog.DatapathFields(name)
}

func (componentCatalog) Components(name string, _ map[string]any, sites int) []Component {
	if name != "relay" {
		return []Component{{Name: "kernel", Role: "kernel"}}
	}
	var out []Component
	for i := range sites {
		out = append(out, Component{Name: "haproxy@" + string(rune('a'+i)), Role: "relay", Process: true})
	}
	return out
}

// TestLimitNamesNoComponent: a limit that names no component or role of
// any listed datapath (the README's old example: native and vxlan with a
// relay limit) is an error with file, line and key, listing what there is;
// one that names only kernel work is too.
func TestLimitNamesNoComponent(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"datapaths: [native, vxlan]\nworkloads: [{type: rr}]\nlimits: {relay: {cpu: [0.5, 1]}}\n",
			"test.yaml:3: limits.relay: names no component or role of the datapaths (native: kernel (kernel); vxlan: kernel (kernel))"},
		{"datapaths: [native, relay]\nworkloads: [{type: rr}]\nlimits:\n  haproxy@c: {cpu: 1}\n",
			"test.yaml:4: limits.haproxy@c: names no component or role of the datapaths (native: kernel (kernel); relay: haproxy@a (relay), haproxy@b (relay))"},
		{"datapaths: [native]\nworkloads: [{type: rr}]\nlimits: {kernel: {cpu: 1}}\n",
			"test.yaml:3: limits.kernel: names only kernel work, which has no process to limit"},
	} {
		_, err := Parse("test.yaml", []byte(tc.src), componentCatalog{})
		if errText(err) != tc.want {
			t.Errorf("%s:\ngot  %v\nwant %s", tc.src, err, tc.want)
		}
	}
	// The same scenario parses with a relay among the datapaths, and with a
	// catalog that cannot list components (nothing to check against).
	for _, src := range []string{
		"datapaths: [native, relay]\nworkloads: [{type: rr}]\nlimits: {relay: {cpu: [0.5, 1]}, haproxy@b: {cpu: 2}}\n",
	} {
		if _, err := Parse("test.yaml", []byte(src), componentCatalog{}); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	if _, err := Parse("test.yaml", []byte("datapaths: [native, vxlan]\nworkloads: [{type: rr}]\nlimits: {relay: {cpu: 1}}\n"), fakeCatalog{}); err != nil {
		t.Errorf("without a ComponentLister: %v", err)
	}
}

// TestLimitsApplyToTheirDatapaths: a baseline without the limited
// component runs each workload point once, without limit parameters; the
// datapath with it runs every limit value.
func TestLimitsApplyToTheirDatapaths(t *testing.T) {
	const src = "datapaths: [native, relay]\nworkloads: [{type: rr, concurrency: [1, 8]}]\nlimits: {relay: {cpu: [0.5, 1, 2]}}\n"
	s, err := Parse("test.yaml", []byte(src), componentCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Limits["relay"].Datapaths; !reflect.DeepEqual(got, []string{"relay"}) {
		t.Errorf("limit applies to %q, want [relay]", got)
	}
	keys := func(pts []Point) []string {
		var out []string
		for _, p := range pts {
			out = append(out, p.Params.Key())
		}
		return out
	}
	want := []string{"concurrency=1 request_size=64 response_size=64", "concurrency=8 request_size=64 response_size=64"}
	if got := keys(s.PointsOf("native")); !reflect.DeepEqual(got, want) {
		t.Errorf("native's points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := s.PointsOf("relay"); len(got) != 6 || !reflect.DeepEqual(got, s.Points()) {
		t.Errorf("relay's points %q, want the 6 of Points %q", keys(got), keys(s.Points()))
	}
	// Overrides that drop the relay leave the file's scenario alone, and the
	// limit then names nothing listed.
	if err := s.Apply(Overrides{Datapaths: []string{"native"}}, componentCatalog{}); err == nil || !strings.Contains(err.Error(), "limits.relay: names no component") {
		t.Errorf("--datapath native: %v, want the limit rejected", err)
	}
	if got := s.Limits["relay"].Datapaths; !reflect.DeepEqual(got, []string{"relay"}) {
		t.Errorf("after a failed Apply the limit applies to %q, want [relay]", got)
	}
	// A scenario decoded without the catalog's help (Datapaths nil) gives
	// every datapath every limit, as before.
	s.Limits = map[string]Limit{"relay": {CPU: []float64{0.5, 1, 2}}}
	if got := s.PointsOf("native"); len(got) != 6 {
		t.Errorf("native's points without Limit.Datapaths: %d, want 6", len(got))
	}
}
