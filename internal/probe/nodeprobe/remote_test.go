package nodeprobe_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
	"github.com/spanperf/spanperf/internal/results"
)

// Remote's plumbing, with an exec that runs the command in this process
// (the real exec is in TestClusterDaemonSet): the spec goes in on stdin,
// the result comes back; a failed exec, or a command that prints no
// result, is a Result naming the node and pod.
func TestRemote(t *testing.T) {
	inProcess := func(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		if strings.Join(argv, " ") != "/spanperf agent nodeprobe" {
			return errors.New("unexpected argv " + strings.Join(argv, " "))
		}
		if code := nodeprobe.Main(argv[3:], stdin, stdout, stderr); code != 0 {
			return errors.New("command terminated with non-zero exit code")
		}
		return nil
	}
	spec := nodeprobe.Spec{Window: nodeprobe.Duration(500 * time.Millisecond), Interval: nodeprobe.Duration(100 * time.Millisecond)}
	r := nodeprobe.Remote(context.Background(), inProcess, "ns1", "probe-x", "c", "node-a", spec)
	if r.Error != "" || r.Node == "" || r.Metrics[results.ProbeWindow] < 0.4 {
		t.Errorf("result %+v: want a 0.5 s window and no error", r)
	}

	bad := spec
	bad.Components = []nodeprobe.Component{{Name: "x"}}
	if r := nodeprobe.Remote(context.Background(), inProcess, "ns1", "probe-x", "c", "node-a", bad); r.Node != "node-a" || !strings.Contains(r.Error, "no pod_uid") {
		t.Errorf("bad spec: %+v", r)
	}
	gone := func(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		io.WriteString(stderr, "error: unable to upgrade connection: container not found")
		return errors.New("exit code 1")
	}
	if r := nodeprobe.Remote(context.Background(), gone, "ns1", "probe-x", "c", "node-a", spec); r.Node != "node-a" ||
		r.Error != `exec in pod ns1/probe-x: exit code 1 (stderr "error: unable to upgrade connection: container not found")` {
		t.Errorf("failed exec: %+v", r)
	}
	if r := nodeprobe.Remote(context.Background(), inProcess, "ns1", "probe-x", "c", "node-a", nodeprobe.Spec{}); !strings.Contains(r.Error, "needs a window") {
		t.Errorf("no window: %+v", r)
	}
}
