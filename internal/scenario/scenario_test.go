package scenario

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, src string) *Scenario {
	t.Helper()
	s, err := Parse("test.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const applyBase = `
datapaths: [native, {name: vxlan, mtu: 9000, label: vx9000}]
workloads:
  - type: stream
  - type: rr
    concurrency: [1, 8]
  - type: rr
    request_size: 1k
duration: 2s
`

func TestApply(t *testing.T) {
	for _, tt := range []struct {
		name      string
		o         Overrides
		labels    []string
		baseline  string
		workloads []string
		err       string
	}{
		{name: "none", labels: []string{"native", "vx9000"}, baseline: "native", workloads: []string{"stream", "rr", "rr"}},
		{name: "keep by label", o: Overrides{Datapaths: []string{"vx9000", "native"}},
			labels: []string{"vx9000", "native"}, baseline: "native", workloads: []string{"stream", "rr", "rr"}},
		{name: "baseline dropped", o: Overrides{Datapaths: []string{"vx9000"}},
			labels: []string{"vx9000"}, baseline: "vx9000", workloads: []string{"stream", "rr", "rr"}},
		{name: "add by name", o: Overrides{Datapaths: []string{"geneve", "vxlan", "geneve"}},
			labels: []string{"geneve", "vxlan"}, baseline: "geneve", workloads: []string{"stream", "rr", "rr"}},
		{name: "unknown datapath", o: Overrides{Datapaths: []string{"native", "foo"}},
			err: `scenario test.yaml: datapaths: unknown datapath "foo" (known: geneve, native, vxlan)`},
		{name: "workloads", o: Overrides{Workloads: []string{"rr", "crr"}},
			labels: []string{"native", "vx9000"}, baseline: "native", workloads: []string{"rr", "rr", "crr"}},
		{name: "unknown workload", o: Overrides{Workloads: []string{"udp"}},
			err: `scenario test.yaml: workloads: unknown workload type "udp" (known: crr, rr, stream, tune)`},
		{name: "added workload invalid", o: Overrides{Workloads: []string{"tune"}},
			err: `scenario test.yaml: workloads[0]: missing required key "target"`},
		{name: "bad reps", o: Overrides{Reps: -1, Duration: -time.Second},
			err: "scenario test.yaml: duration: must be > 0, got -1s\nscenario test.yaml: repetitions: must be ≥ 1, got -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := load(t, applyBase)
			before := load(t, applyBase)
			err := s.Apply(tt.o, fakeCatalog{})
			if errText(err) != tt.err {
				t.Fatalf("error = %v, want %q", err, tt.err)
			}
			if err != nil {
				if !reflect.DeepEqual(s, before) {
					t.Errorf("failed Apply changed the scenario")
				}
				return
			}
			var types []string
			for _, w := range s.Workloads {
				types = append(types, w.Type)
			}
			if got := s.DatapathLabels(); !reflect.DeepEqual(got, tt.labels) || s.Baseline != tt.baseline || !reflect.DeepEqual(types, tt.workloads) {
				t.Errorf("labels %v baseline %q workloads %v; want %v %q %v", got, s.Baseline, types, tt.labels, tt.baseline, tt.workloads)
			}
		})
	}
}

func TestApplyScalars(t *testing.T) {
	s := load(t, applyBase)
	if err := s.Apply(Overrides{Duration: time.Minute, Reps: 7, Datapaths: []string{"geneve"}}, fakeCatalog{}); err != nil {
		t.Fatal(err)
	}
	if s.Duration != time.Minute || s.Repetitions != 7 || s.Warmup != time.Second {
		t.Errorf("duration %v reps %d warmup %v", s.Duration, s.Repetitions, s.Warmup)
	}
	if want := (DatapathSpec{Name: "geneve", Label: "geneve"}); !reflect.DeepEqual(s.Datapaths, []DatapathSpec{want}) {
		t.Errorf("datapaths = %+v", s.Datapaths)
	}
}

func TestPoints(t *testing.T) {
	s := load(t, `
datapaths: [native]
workloads:
  - type: rr
    request_size: [1k, 64]
    response_size: 1
    concurrency: [8, 1]
  - type: tune
    target: x
    cc: [cubic, bbr]
`)
	var got []string
	for _, p := range s.Points() {
		got = append(got, p.Workload+" "+p.Params.Key())
	}
	want := []string{
		"rr concurrency=8 request_size=1000 response_size=1",
		"rr concurrency=8 request_size=64 response_size=1",
		"rr concurrency=1 request_size=1000 response_size=1",
		"rr concurrency=1 request_size=64 response_size=1",
		"tune cc=cubic gain=1 interval=100ms pacing=false rate=1000000000 target=x",
		"tune cc=bbr gain=1 interval=100ms pacing=false rate=1000000000 target=x",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	p := s.Points()[4].Params
	for k, v := range map[string]any{"cc": "cubic", "gain": 1.0, "interval": "100ms", "pacing": false, "rate": int64(1e9), "target": "x"} {
		if p[k] != v {
			t.Errorf("param %s = %#v, want %#v", k, p[k], v)
		}
	}
}

func TestNormalizeIdempotent(t *testing.T) {
	s := load(t, applyBase)
	again := load(t, applyBase)
	again.Normalize(fakeCatalog{})
	if !reflect.DeepEqual(s, again) {
		t.Errorf("Normalize changed a parsed scenario:\n%+v\n%+v", s, again)
	}

	var z Scenario
	z.Datapaths = []DatapathSpec{{Name: "vxlan"}}
	z.Workloads = []WorkloadSpec{{Type: "stream"}}
	z.Normalize(fakeCatalog{})
	once := z
	z.Normalize(fakeCatalog{})
	if !reflect.DeepEqual(z, once) {
		t.Errorf("second Normalize changed the scenario")
	}
	want := Scenario{
		Sites: 2, WAN: WAN{MTU: 1500}, Topology: "mesh", Baseline: "vxlan", Repetitions: 3, Duration: 10 * time.Second,
		Energy:        Energy{WattsPerCore: DefaultWattsPerCore},
		ProbeInterval: 200 * time.Millisecond,
		Datapaths:     []DatapathSpec{{Name: "vxlan", Label: "vxlan", Options: map[string]any{"mtu": int64(1450), "vni": int64(42)}}},
		Workloads:     []WorkloadSpec{{Type: "stream", Params: map[string][]any{"message_size": {int64(131072)}, "streams": {int64(1)}}}},
	}
	if !reflect.DeepEqual(z, want) {
		t.Errorf("Normalize:\n%+v\nwant\n%+v", z, want)
	}
	if err := z.Validate(fakeCatalog{}); err != nil {
		t.Error(err)
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Scenario)
		err  string
	}{
		{"ok", func(*Scenario) {}, ""},
		{"unknown datapath", func(s *Scenario) { s.Datapaths[0].Name = "foo" },
			`scenario v.yaml: datapaths[0]: unknown datapath "foo" (known: geneve, native, vxlan)`},
		{"no datapaths", func(s *Scenario) { s.Datapaths = nil },
			`scenario v.yaml: datapaths: must list at least one datapath`},
		{"baseline", func(s *Scenario) { s.Baseline = "x" },
			`scenario v.yaml: baseline: "x" is not a datapath label (labels: native, vxlan)`},
		{"duplicate label", func(s *Scenario) { s.Datapaths[1].Label = "native"; s.Datapaths[1].Options["vnii"] = int64(1) },
			"scenario v.yaml: datapaths[1].vnii: unknown key \"vnii\" (did you mean \"vni\"?)\n" +
				`scenario v.yaml: datapaths[1]: duplicate label "native" (also datapaths[0]; set label to tell them apart)`},
		{"wrong go type", func(s *Scenario) { s.Datapaths[1].Options["mtu"] = 9000 },
			`scenario v.yaml: datapaths[1].mtu: want an integer, got 9000 (int)`},
		{"list for scalar option", func(s *Scenario) { s.Workloads[0].Params["streams"] = []any{int64(1), int64(0)} },
			`scenario v.yaml: workloads[0].streams[1]: must be ≥ 1, got 0`},
		{"empty list", func(s *Scenario) { s.Workloads[0].Params["streams"] = nil },
			`scenario v.yaml: workloads[0].streams: empty list`},
		{"unknown workload", func(s *Scenario) { s.Workloads[0].Type = "udp" },
			`scenario v.yaml: workloads[0].type: unknown workload type "udp" (known: crr, rr, stream, tune)`},
		{"topology", func(s *Scenario) { s.Topology = "star" },
			`scenario v.yaml: topology: must be one of mesh, hub, chain, gateway (direct is mesh's old name), got "star"`},
		{"topology hub", func(s *Scenario) { s.Topology = "hub" },
			`scenario v.yaml: datapaths[1]: topology hub: not supported by vxlan (it supports mesh)`},
		{"gateway", func(s *Scenario) { s.Topology = "gateway" }, ""},
		{"gateway unsupported", func(s *Scenario) {
			s.Topology = "gateway"
			s.Datapaths[1].Name = "geneve"
			s.Datapaths[1].Options = nil
		},
			`scenario v.yaml: datapaths[1]: topology gateway: not supported by geneve`},
		{"wan", func(s *Scenario) { s.WAN = WAN{MTU: 100, RateBPS: -1}; s.Sites = 1 },
			"scenario v.yaml: sites: must be ≥ 2, got 1\nscenario v.yaml: wan.mtu: must be ≥ 576, got 100\nscenario v.yaml: wan.rate: must be ≥ 0, got -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("v.yaml", []byte("datapaths: [native, vxlan]\nworkloads: [{type: stream}]\n"), fakeCatalog{})
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(s)
			if err := s.Validate(fakeCatalog{}); errText(err) != tt.err {
				t.Errorf("Validate:\n%v\nwant:\n%s", err, tt.err)
			}
		})
	}
}
