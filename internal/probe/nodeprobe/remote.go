package nodeprobe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ExecFunc runs argv in container of pod ns/pod with stdin, stdout and
// stderr, as (*kube.Clients).Exec does.
type ExecFunc func(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error

// Argv is the command Remote execs in a node probe pod.
var Argv = []string{"/spanperf", "agent", "nodeprobe"}

// remoteSlack is how long Remote waits beyond the spec's delay and window.
const remoteSlack = 30 * time.Second

// Remote runs spec (its window must be set) in the node probe pod ns/pod,
// container container, on node node, by exec, and returns its Result; on
// failure, a Result for node with Error naming the pod and what failed.
// It gives up the delay and window plus 30 s after it starts.
func Remote(ctx context.Context, exec ExecFunc, ns, pod, container, node string, spec Spec) Result {
	fail := func(err error) Result {
		return Result{Node: node, Error: fmt.Sprintf("exec in pod %s/%s: %v", ns, pod, err)}
	}
	if spec.Window <= 0 {
		return fail(errors.New("nodeprobe: a remote probe needs a window"))
	}
	if err := spec.Validate(); err != nil {
		return fail(err)
	}
	if spec.Node == "" {
		spec.Node = node
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(spec.Delay+spec.Window)+remoteSlack)
	defer cancel()
	var out, errb bytes.Buffer
	xerr := exec(ctx, ns, pod, container, Argv, bytes.NewReader(in), &out, &errb)
	var r Result
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		why := xerr
		if why == nil {
			why = fmt.Errorf("result: %w (stdout %q)", jerr, trim(out.String()))
		}
		if s := trim(errb.String()); s != "" {
			why = fmt.Errorf("%w (stderr %q)", why, s)
		}
		return fail(why)
	}
	if r.Node == "" {
		r.Node = node
	}
	if r.Error == "" && xerr != nil {
		r.Error = fmt.Sprintf("exec in pod %s/%s: %v", ns, pod, xerr)
	}
	return r
}

func trim(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
