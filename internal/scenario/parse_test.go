package scenario

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/errors")

func TestParseQuick(t *testing.T) {
	s, err := Load("testdata/quick.yaml", fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.DatapathLabels(), []string{"native", "vxlan"}; !reflect.DeepEqual(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	if s.Name != "quick" || s.Sites != 2 || s.Baseline != "native" || s.Repetitions != 3 ||
		s.Duration != 2*time.Second || s.Warmup != time.Second || s.WAN.RateBPS != 0 || s.WAN.MTU != 1500 {
		t.Errorf("scenario = %+v", s)
	}
	if got, want := s.Datapaths[1].Options, map[string]any{"mtu": int64(1450), "vni": int64(42)}; !reflect.DeepEqual(got, want) {
		t.Errorf("vxlan options = %v, want %v", got, want)
	}
	var keys []string
	for _, p := range s.Points() {
		keys = append(keys, p.Workload+" "+p.Params.Key())
	}
	want := []string{
		"stream message_size=1024 streams=1",
		"stream message_size=131072 streams=1",
		"rr concurrency=1 request_size=64 response_size=64",
		"rr concurrency=8 request_size=64 response_size=64",
		"crr concurrency=1 request_size=64 response_size=64",
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("points:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	if err := s.Validate(fakeCatalog{}); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseForms(t *testing.T) {
	const src = `
sites: 3
wan: {mtu: 9000, rate: 1.5gbit}
datapaths:
  - native
  - {name: vxlan, mtu: 9000, label: vx9000}
  - name: vxlan
    vni: 7
workloads:
  - type: stream
    message_size: [512, 1k, 1KiB, 1.5MiB, "2G"]
  - type: tune
    target: peer
    cc: bbr
    pacing: true
    gain: 2
    interval: 1m
    rate: 10Mbit
duration: 1m
warmup: 0s
seed: -7
`
	s, err := Parse("forms.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		File:     "forms.yaml",
		Sites:    3,
		WAN:      WAN{MTU: 9000, RateBPS: 1_500_000_000},
		Topology: "mesh",
		Baseline: "native",
		Datapaths: []DatapathSpec{
			{Name: "native", Label: "native"},
			{Name: "vxlan", Label: "vx9000", Options: map[string]any{"mtu": int64(9000), "vni": int64(42)}},
			{Name: "vxlan", Label: "vxlan", Options: map[string]any{"mtu": int64(1450), "vni": int64(7)}},
		},
		Workloads: []WorkloadSpec{
			{Type: "stream", Params: map[string][]any{
				"message_size": {int64(512), int64(1000), int64(1024), int64(1572864), int64(2e9)},
				"streams":      {int64(1)},
			}},
			{Type: "tune", Params: map[string][]any{
				"target":   {"peer"},
				"cc":       {"bbr"},
				"pacing":   {true},
				"gain":     {2.0},
				"interval": {time.Minute},
				"rate":     {int64(10e6)},
			}},
		},
		Repetitions:   3,
		Duration:      time.Minute,
		Energy:        Energy{WattsPerCore: DefaultWattsPerCore},
		ProbeInterval: 200 * time.Millisecond,
		Seed:          -7,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	pts := s.Points()
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6", len(pts))
	}
	if got := pts[5].Params["interval"]; got != "1m0s" {
		t.Errorf("interval param = %#v, want \"1m0s\"", got)
	}
}

// TestParseErrors parses each testdata/errors/*.yaml and compares the error
// with the .golden file beside it; -update rewrites the golden files.
func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(filepath.Base(file), data, fakeCatalog{})
			if err == nil {
				t.Fatalf("no error; got %+v", s)
			}
			if s != nil {
				t.Errorf("scenario returned with error")
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("error:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/errors/*.yaml")
	files = append(files, "testdata/quick.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data, fakeCatalog{})
		if err != nil {
			return
		}
		if err := s.Validate(fakeCatalog{}); err != nil {
			t.Fatalf("parsed scenario does not validate: %v", err)
		}
		s.Points()
		s.DatapathLabels()
	})
}

func TestParseKubeSites(t *testing.T) {
	const src = `
sites:
  - {name: east, context: spk1}
  - name: west
    context: spk2
    kubeconfig: /tmp/kc
    node_selector: {spanperf.io/role: bench}
    tolerations: [{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}]
image: spanperf.local/spanperf:dev
probe: node
share_node: true
datapaths: [k8s-pod]
workloads: [{type: rr}]
`
	s, err := Parse("k.yaml", []byte(src), fakeCatalog{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsKube() || s.Sites != 2 || s.Kube.Image != "spanperf.local/spanperf:dev" || s.Kube.Probe != ProbeNode || !s.Kube.ShareNode || s.Kube.AllowPatch {
		t.Errorf("scenario = %+v", s)
	}
	want := []Site{
		{Name: "east", Context: "spk1"},
		{Name: "west", Context: "spk2", Kubeconfig: "/tmp/kc", NodeSelector: map[string]string{"spanperf.io/role": "bench"},
			Tolerations: []Toleration{{Key: "dedicated", Operator: "Equal", Value: "bench", Effect: "NoSchedule"}}},
	}
	if !reflect.DeepEqual(s.SiteList, want) {
		t.Errorf("sites = %+v, want %+v", s.SiteList, want)
	}
	if err := s.Validate(fakeCatalog{}); err != nil {
		t.Errorf("Validate: %v", err)
	}
	s2, err := Parse("k.yaml", []byte(strings.Replace(src, "probe: node\n", "", 1)), fakeCatalog{})
	if err != nil || s2.Kube.Probe != ProbeNone {
		t.Errorf("default probe = %q (%v), want %q", s2.Kube.Probe, err, ProbeNone)
	}
}
