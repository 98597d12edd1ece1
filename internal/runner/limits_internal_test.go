package runner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/workload"
)

func TestCgroupName(t *testing.T) {
	for in, want := range map[string]string{
		"wireguard-go@a": "wireguard-go@a",
		"haproxy relay":  "haproxy_relay",
		"a/b":            "a_b",
		"":               "component",
		"..":             "component",
	} {
		if got := cgroupName(in); got != want {
			t.Errorf("cgroupName(%q) = %q, want %q", in, got, want)
		}
	}
}

var testComps = []results.Component{
	{Name: "kernel", Role: "kernel"},
	{Name: "haproxy@a", Role: "relay", PID: 101},
	{Name: "haproxy@b", Role: "relay", PID: 102},
	{Name: "wg@a", Role: "tunnel", PID: 103},
	{Name: "ktun", Role: "tunnel"},
	{Name: "vxlan", Role: "switch"},
}

func TestLimitsMatchNameOrRole(t *testing.T) {
	c := &componentCgroups{comps: testComps}
	for _, tc := range []struct {
		params results.Params
		want   map[string]float64
		err    string
	}{
		{params: results.Params{"streams": int64(1)}, want: map[string]float64{}},
		{params: results.Params{"limit.relay.cpu": 0.5},
			want: map[string]float64{"haproxy@a": 0.5, "haproxy@b": 0.5}},
		// A name wins over a role, whatever the order of the keys.
		{params: results.Params{"limit.relay.cpu": 0.5, "limit.haproxy@b.cpu": 2.0},
			want: map[string]float64{"haproxy@a": 0.5, "haproxy@b": 2}},
		// Kernel work under a limited role is left alone.
		{params: results.Params{"limit.tunnel.cpu": 0.25}, want: map[string]float64{"wg@a": 0.25}},
		{params: results.Params{"limit.wg@a.cpu": int64(1)}, want: map[string]float64{"wg@a": 1}},
		{params: results.Params{"limit.gateway.cpu": 1.0},
			err: "limits.gateway: no component of this datapath has that name or role (components: kernel (kernel), haproxy@a (relay), haproxy@b (relay), wg@a (tunnel), ktun (tunnel), vxlan (switch))"},
		{params: results.Params{"limit.switch.cpu": 1.0},
			err: "limits.switch: names only kernel work, which has no process to limit"},
		{params: results.Params{"limit.relay.cpu": "lots"},
			err: "limits.relay.cpu: lots is not a number of cores > 0"},
	} {
		got, err := c.limits(tc.params)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%v: error %v, want %q", tc.params, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, %v; want %v", tc.params, got, err, tc.want)
		}
	}
}

// A trial whose limits cannot be applied is recorded as failed, with the
// reason, without running; a component without a cgroup says why it lacks
// the cgroup metric.
func TestRunTrialWithoutCgroups(t *testing.T) {
	c := &componentCgroups{comps: testComps, groups: nil, missing: map[string]string{
		"haproxy@a": "no CPU cgroups here", "haproxy@b": "no CPU cgroups here", "wg@a": "no CPU cgroups here",
	}}
	o := Options{Scenario: &scenario.Scenario{}, Dir: &results.RunDir{Manifest: results.Manifest{Run: "r1"}}}
	ran := false
	run := func(workload.MeasureFunc) results.Record {
		ran = true
		return results.Record{Metrics: map[string]float64{"throughput_bps": 1}}
	}
	rec := c.run(o, Trial{Point: scenario.Point{Workload: "stream", Params: results.Params{"limit.relay.cpu": 0.5}}}, run)
	if ran {
		t.Error("trial ran although its limit could not be applied")
	}
	if !strings.Contains(rec.Error, "cannot limit haproxy@a: no cgroup: no CPU cgroups here") || rec.Run != "r1" || len(rec.Components) != len(testComps) {
		t.Errorf("record %+v", rec)
	}
	rec = c.run(o, Trial{Point: scenario.Point{Workload: "stream", Params: results.Params{}}}, run)
	if !ran || rec.Error != "" {
		t.Fatalf("unlimited trial: ran %v, %+v", ran, rec)
	}
	want := map[string]string{
		"cgroup_cpu_cores{haproxy@a}": "no CPU cgroups here",
		"cgroup_cpu_cores{haproxy@b}": "no CPU cgroups here",
		"cgroup_cpu_cores{wg@a}":      "no CPU cgroups here",
	}
	if !reflect.DeepEqual(rec.Missing, want) {
		t.Errorf("missing %v, want %v", rec.Missing, want)
	}
	if _, ok := rec.Metrics["cgroup_cpu_cores{wg@a}"]; ok {
		t.Error("missing metric recorded as a value")
	}
}

// TestKubeLimitsMatchPods: on clusters a limit key names pod components
// by name or role, as locally processes; the kernel, which has no pod, is
// refused, and an unknown key lists the components.
func TestKubeLimitsMatchPods(t *testing.T) {
	comps := []results.Component{
		{Name: "kernel", Role: "kernel"},
		{Name: "relay", Role: "relay", Pod: "relay-a", Namespace: "user", Context: "spk2"},
		{Name: "router-0", Role: "router", Pod: "r-0", Namespace: "user", Context: "spk2"},
		{Name: "router-1", Role: "router", Pod: "r-1", Namespace: "user", Context: "spk2"},
	}
	pod := func(c results.Component) bool { return c.Pod != "" }
	lim, err := limitsOf(comps, results.Params{results.CPULimitParam("relay"): 0.1, results.CPULimitParam("router"): 0.5}, "pod", pod)
	if want := map[string]float64{"relay": 0.1, "router-0": 0.5, "router-1": 0.5}; err != nil || !reflect.DeepEqual(lim, want) {
		t.Errorf("limits %v, %v; want %v", lim, err, want)
	}
	if _, err := limitsOf(comps, results.Params{results.CPULimitParam("kernel"): 0.1}, "pod", pod); err == nil || !strings.Contains(err.Error(), "no pod to limit") {
		t.Errorf("kernel: %v, want no pod to limit", err)
	}
	if _, err := limitsOf(comps, results.Params{results.CPULimitParam("gw"): 0.1}, "pod", pod); err == nil || !strings.Contains(err.Error(), "relay (relay), router-0 (router)") {
		t.Errorf("unknown key: %v, want the components listed", err)
	}
}
