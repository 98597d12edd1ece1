package nodeprobe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/cgroup"
	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
	"github.com/spanperf/spanperf/internal/probe/probetest"
	"github.com/spanperf/spanperf/internal/results"
)

func TestMain(m *testing.M) {
	probetest.RunIfHog()
	os.Exit(m.Run())
}

// podCgroup makes a cgroup shaped like the kubelet's (cgroupfs driver)
// for a pod of its own: <test root>/kubepods/besteffort/pod<uid>/<cid>,
// removed in t.Cleanup (after what the test starts later is gone).
func podCgroup(t *testing.T, uid, cid string) *cgroup.Cgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a cgroup")
	}
	cg, err := cgroup.New(cgroup.Spec{Path: fmt.Sprintf("spanperf-nodeprobe-test-%d/kubepods/besteffort/pod%s/%s", os.Getpid(), uid, cid)})
	if err != nil {
		t.Fatalf("pod cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Errorf("remove pod cgroup: %v", err)
		}
	})
	return cg
}

// runMain runs `agent nodeprobe` with args and stdin and decodes its
// result.
func runMain(t *testing.T, stdin io.Reader, args ...string) (nodeprobe.Result, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := nodeprobe.Main(args, stdin, &out, &errb)
	var r nodeprobe.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("agent nodeprobe %v: exit %d, stdout %q: %v (stderr %q)", args, code, out.String(), err, errb.String())
	}
	return r, code, errb.String()
}

// Known answer (a), without Kubernetes: a process in a cgroup shaped
// like a pod's container (cgroupfs driver), not this test's descendant,
// spinning 40% of a CPU, is measured by `agent nodeprobe` (found by the
// pod UID, and by its container ID) at the CPU its own /proc/PID/stat
// shows over the window, ±10%; as one of the run's pods it is not
// foreign, while a second hog in no pod is, at its CPU ±20%. A pod and a
// container with no process on the node are missing, with the reason.
func TestKnownDutyInPodCgroup(t *testing.T) {
	const (
		uid    = "3f1c2a8e-5b7d-4e21-9a0c-0d4b6e8f1a27"
		cid    = "9f3e0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7"
		duty   = 0.4
		window = 3 * time.Second
	)
	cg := podCgroup(t, uid, cid)
	hog := probetest.StartHog(t, duty)
	if err := cg.Add(hog.PID); err != nil {
		t.Fatal(err)
	}
	other := probetest.StartHog(t, 0.2)
	spec := nodeprobe.Spec{
		Components: []nodeprobe.Component{
			{Name: "hog", PodUID: uid, Container: "hog", ContainerID: "containerd://" + cid},
			{Name: "pod", PodUID: strings.ToUpper(uid)},
			{Name: "absent-pod", PodUID: "00000000-0000-0000-0000-000000000001"},
			{Name: "absent-container", PodUID: uid, Container: "sidecar", ContainerID: "containerd://abcdef"},
		},
		RunPods:  []string{uid},
		Node:     "test-node",
		Delay:    nodeprobe.Duration(200 * time.Millisecond),
		Window:   nodeprobe.Duration(window),
		Interval: nodeprobe.Duration(200 * time.Millisecond),
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("spec: %s", b)
	time.Sleep(200 * time.Millisecond)
	for attempt := 1; ; attempt++ {
		h0, o0, t0 := hog.CPUSeconds(t), other.CPUSeconds(t), time.Now()
		r, code, stderr := runMain(t, nil, "--spec", string(b))
		secs := time.Since(t0).Seconds()
		hogCores, otherCores := (hog.CPUSeconds(t)-h0)/secs, (other.CPUSeconds(t)-o0)/secs
		if code != 0 {
			t.Fatalf("exit %d: %s (%+v)", code, stderr, r)
		}
		got, pod := r.Metrics[results.For(results.CPUCores, "hog")], r.Metrics[results.For(results.CPUCores, "pod")]
		var inForeign, otherForeign float64
		for _, f := range r.Foreign {
			switch f.PID {
			case hog.PID:
				inForeign = f.Cores
			case other.PID:
				otherForeign = f.Cores
			}
		}
		t.Logf("node %s boot %s window %.2fs: hog %.3f cores by its stat, probe %.3f (pod %.3f, rss %.0f); foreign %.3f (the other hog %.3f by its stat, %.3f counted); busy %.3f path %.3f",
			r.Node, r.BootID, r.Metrics[results.ProbeWindow], hogCores, got, pod, r.Metrics[results.For(results.RSSBytesMax, "hog")],
			r.Metrics[results.CPUCoresForeign], otherCores, otherForeign, r.Metrics[results.CPUCoresBusy], r.Metrics[results.CPUCoresPath])
		var fail []string
		switch {
		case r.Node != "test-node" && os.Getenv(nodeprobe.NodeNameEnv) == "":
			fail = append(fail, fmt.Sprintf("node %q, want the spec's test-node", r.Node))
		case r.BootID == "":
			fail = append(fail, "no boot_id")
		}
		if hogCores < duty*0.5 {
			fail = append(fail, fmt.Sprintf("hog ran only %.3f cores, want about %.1f (machine too busy)", hogCores, duty))
		}
		if math.Abs(got-hogCores) > 0.1*hogCores {
			fail = append(fail, fmt.Sprintf("container measured %.3f cores, want %.3f ±10%%", got, hogCores))
		}
		if math.Abs(pod-got) > 1e-9 {
			fail = append(fail, fmt.Sprintf("pod %.3f cores, want the container's %.3f (its only process)", pod, got))
		}
		if inForeign != 0 {
			fail = append(fail, fmt.Sprintf("the run's pod's process counted foreign (%.3f cores)", inForeign))
		}
		if math.Abs(otherForeign-otherCores) > 0.2*otherCores {
			fail = append(fail, fmt.Sprintf("the hog in no pod counted %.3f foreign cores, want %.3f ±20%%", otherForeign, otherCores))
		}
		for _, name := range []string{"absent-pod", "absent-container"} {
			why, ok := r.Missing[results.For(results.CPUCores, name)]
			if !ok || !strings.Contains(why, "no process") {
				fail = append(fail, fmt.Sprintf("%s: missing %q, want \"no process ...\"", name, why))
			}
		}
		if len(fail) == 0 {
			t.Logf("missing: %v", r.Missing)
			return
		}
		if attempt == 2 {
			t.Fatal(strings.Join(fail, "; "))
		}
		t.Logf("attempt %d: %s; once more", attempt, strings.Join(fail, "; "))
	}
}

// An open window (0) read from stdin ends when stdin does.
func TestOpenWindowEndsAtStdinEOF(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"interval": "100ms", "node": "n1"}`+"\n")
		time.Sleep(1200 * time.Millisecond)
		pw.Close()
	}()
	t0 := time.Now()
	r, code, stderr := runMain(t, pr)
	el := time.Since(t0)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	w := r.Metrics[results.ProbeWindow]
	if w < 1.0 || w > 1.4 || el > 3*time.Second {
		t.Fatalf("window %.2fs after %v, want about 1.2s (stdin closed then)", w, el)
	}
	if _, ok := r.Metrics[results.CPUCoresBusy]; !ok {
		t.Fatalf("no %s: %v", results.CPUCoresBusy, r.Missing)
	}
}

// Bad specs fail with a result that says why, and exit 1.
func TestBadSpec(t *testing.T) {
	for spec, want := range map[string]string{
		`{"components": [{"name": "a"}]}`:                                                `component "a": no pod_uid`,
		`{"components": [{"name": "a", "pod_uid": "u", "container": "c"}]}`:              `container "c" without its container_id`,
		`{"components": [{"name": "a", "pod_uid": "u"}, {"name": "a", "pod_uid": "v"}]}`: `component "a" named twice`,
		`{"window": "-1s"}`:  "window must be ≥ 0",
		`{"window": "soon"}`: "duration",
		`{"windows": "1s"}`:  `unknown field "windows"`,
	} {
		r, code, _ := runMain(t, nil, "--spec", spec)
		if code != 1 || !strings.Contains(r.Error, want) {
			t.Errorf("%s: exit %d, error %q; want 1 and %q", spec, code, r.Error, want)
		}
	}
}
