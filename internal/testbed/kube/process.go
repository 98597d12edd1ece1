package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/testbed"
)

// How long Stop waits for the pieces of a remote stop.
const (
	// signalTimeout bounds one `agent signal` exec.
	signalTimeout = 15 * time.Second
	// pidfileWait is how long `agent signal` waits for a process just
	// started to write its pidfile.
	pidfileWait = 5 * time.Second
	// streamEndTimeout is how long Stop waits, after SIGKILL, for the exec
	// stream to end before it cuts the stream.
	streamEndTimeout = 10 * time.Second
)

// statusNotRunning is `agent signal`'s exit status for a process that is
// not running (agent.SignalNotRunning).
const statusNotRunning = 3

// statusNotFound is `agent run`'s exit status for a program not in the
// image's PATH (agent.RunNotFound).
const statusNotFound = 127

// Exec runs cmd in the site's agent pod, as `/spanperf agent run
// --pidfile F -- ARGS`, so that Stop can signal it: with cmd.Agent in the
// agent container; with cmd.Server in the server container (from
// Spec.ServerImage), through the agent copied there, which execs
// cmd.Path from the image's PATH (`--prog`) unless cmd.Agent is set too.
// A program the image lacks fails naming it, the image, the pod and the
// container.
// ctx bounds only the start; the stream lives until the process exits or
// Stop. cmd.Stdout and cmd.Stderr are streamed; with Stderr nil, its last
// lines are kept for Tail and for Wait's error.
func (s *Site) Exec(ctx context.Context, cmd testbed.Command) (testbed.Process, error) {
	switch {
	case cmd.Server && s.tb.spec.ServerImage == "":
		return nil, fmt.Errorf("site %s is a pod without a server container: name the image of %s with server_image: in the scenario (or --server-image)", s.Name(), cmd.Path)
	case !cmd.Agent && !cmd.Server:
		return nil, fmt.Errorf("site %s is a pod: it runs only the spanperf agent, not %s", s.Name(), cmd.Path)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := cmd.Name
	if name == "" {
		name = "agent"
	}
	p := &podProcess{
		site: s, name: name + "@" + s.Name(), done: make(chan struct{}),
		pidfile: fmt.Sprintf("/tmp/spanperf-%d.pid", s.tb.seq.Add(1)),
		stdin:   cmd.Stdin, stdout: cmd.Stdout, stderr: cmd.Stderr,
		server: cmd.Server,
	}
	if p.stderr == nil {
		p.tail = testbed.NewTail(4096)
		p.stderr = p.tail
	}
	argv := []string{AgentPath, "agent", "run", "--pidfile", p.pidfile}
	if cmd.Server {
		argv[0] = ServerAgentPath
		if !cmd.Agent {
			p.prog = cmd.Path
			argv = append(argv, "--prog", cmd.Path)
		}
	}
	for _, e := range cmd.Env {
		argv = append(argv, "--env", e)
	}
	p.argv = append(append(argv, "--"), cmd.Args...)
	s.tb.mu.Lock()
	defer s.tb.mu.Unlock()
	if s.tb.closed {
		return nil, fmt.Errorf("%s: testbed closed", p.name)
	}
	// The stream outlives ctx (it bounds only the start) but keeps its values.
	var sctx context.Context
	sctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// Keep only the processes Close may have to stop.
	live := s.tb.procs[:0]
	for _, q := range s.tb.procs {
		select {
		case <-q.done:
		default:
			live = append(live, q)
		}
	}
	s.tb.procs = append(live, p)
	go p.run(sctx)
	return p, nil
}

// podProcess is a testbed.Process: an exec stream into an agent pod.
type podProcess struct {
	site           *Site
	name           string
	pidfile        string
	argv           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	tail           *testbed.TailBuffer
	// server: the process runs in the server container; prog is the
	// program `agent run` looks up there ("" for the agent itself).
	server bool
	prog   string
	cancel context.CancelFunc

	done     chan struct{}
	err      error
	stopOnce sync.Mutex
}

var _ testbed.Process = (*podProcess)(nil)

func (p *podProcess) run(ctx context.Context) {
	defer close(p.done)
	defer p.cancel()
	c := p.site.cl.clients
	err := c.Exec(ctx, p.site.Namespace(), podName(p.site.Name()), container(p.server), p.argv, p.stdin, p.stdout, p.stderr)
	if code, ok := ExitStatus(err); ok && code == statusNotFound && p.prog != "" {
		err = fmt.Errorf("%s: not found in image %s (%s): %w", p.prog, p.site.ServerImage(), p.site.Where(true), err)
	}
	if err != nil {
		msg := p.name + ": " + err.Error()
		if p.tail != nil && p.tail.Len() > 0 {
			msg += ": " + strings.TrimSpace(p.tail.String())
		}
		if t := p.site.podTrouble(); t != "" {
			msg += "; " + t
		}
		err = &procError{msg: msg, err: err}
	}
	p.err = err
}

// podTrouble says what happened to the site's agent pod since it was
// Ready, when something did (evicted, deleted, replaced, its agent
// restarted): the reason a process in it failed. "" when the pod is
// as it was, or cannot be read.
func (s *Site) podTrouble() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, ns, name := s.cl.clients, s.Namespace(), podName(s.Name())
	pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("pod %s/%s is gone", ns, name)
	}
	if err != nil {
		return ""
	}
	where := fmt.Sprintf("pod %s/%s", ns, name)
	if pod.UID != s.pod.UID {
		return where + " was replaced"
	}
	var why []string
	for _, cd := range pod.Status.Conditions {
		if cd.Type == corev1.DisruptionTarget && cd.Status == corev1.ConditionTrue {
			why = append(why, strings.TrimRight(cd.Reason+": "+cd.Message, ": "))
		}
	}
	if pod.DeletionTimestamp != nil {
		why = append([]string{"being deleted"}, why...)
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		state, _ := podState(pod)
		why = append(why, state)
	}
	for i, cs := range pod.Status.ContainerStatuses {
		if i < len(s.pod.Status.ContainerStatuses) && cs.RestartCount > s.pod.Status.ContainerStatuses[i].RestartCount {
			w := cs.Name + " container restarted"
			if t := cs.LastTerminationState.Terminated; t != nil {
				w += ": " + terminated(cs.Name, t)
			}
			why = append(why, w)
		}
	}
	if len(why) == 0 {
		return ""
	}
	return where + ": " + strings.Join(why, "; ")
}

// procError is a process's error with its name and stderr's tail.
type procError struct {
	msg string
	err error
}

func (e *procError) Error() string { return e.msg }
func (e *procError) Unwrap() error { return e.err }

// Wait waits for the process to exit and returns its error (one carrying
// the exit status, see ExitStatus, when it is not 0).
func (p *podProcess) Wait() error { <-p.done; return p.err }

// Done is closed when the process has exited (its exec stream has ended).
func (p *podProcess) Done() <-chan struct{} { return p.done }

// Tail returns the last lines of stderr, when Command.Stderr was nil.
func (p *podProcess) Tail() string {
	if p.tail == nil {
		return ""
	}
	return p.tail.String()
}

// Stop sends SIGTERM to the process in the pod (by exec'ing `agent
// signal`), waits up to grace, then sends SIGKILL, and waits for the
// stream to end (cutting it after streamEndTimeout). Stopping an exited
// process is a no-op. It returns an error only when the process could not
// be signalled and its stream did not end.
func (p *podProcess) Stop(grace time.Duration) error {
	p.stopOnce.Lock()
	defer p.stopOnce.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	termErr := p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	killErr := p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(streamEndTimeout):
	}
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(streamEndTimeout):
	}
	if err := errors.Join(termErr, killErr); err != nil {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	return nil
}

// signal sends sig to the process through `agent signal` in its pod; a
// process that is not running is not an error.
func (p *podProcess) signal(sig syscall.Signal) error {
	name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGKILL: "KILL"}[sig]
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	var stderr bytes.Buffer
	c := p.site.cl.clients
	bin := AgentPath
	if p.server {
		bin = ServerAgentPath
	}
	err := c.Exec(ctx, p.site.Namespace(), podName(p.site.Name()), container(p.server),
		[]string{bin, "agent", "signal", "--pidfile", p.pidfile, "--signal", name, "--wait", pidfileWait.String()},
		nil, nil, &stderr)
	if code, ok := ExitStatus(err); ok && code == statusNotRunning {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
