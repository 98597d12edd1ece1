package netns

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// process is a testbed.Process backed by exec.Cmd, in its own process group.
type process struct {
	cmd  *exec.Cmd
	name string
	done chan struct{}
	err  error
	tail *testbed.TailBuffer
}

func (p *process) PID() int              { return p.cmd.Process.Pid }
func (p *process) Done() <-chan struct{} { return p.done }
func (p *process) Wait() error           { <-p.done; return p.err }

func (p *process) Tail() string {
	if p.tail == nil {
		return ""
	}
	return p.tail.String()
}

func (p *process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// wait reaps the process and then its process group's leftovers.
func (p *process) wait() {
	p.err = p.cmd.Wait()
	if p.err != nil && p.tail != nil && p.tail.Len() > 0 {
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			p.err = &exitError{err: p.err, name: p.name, tail: p.tail.String()}
		}
	}
	// Children of the process (a daemon's workers) die with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	close(p.done)
}

type exitError struct {
	err  error
	name string
	tail string
}

func (e *exitError) Error() string {
	return e.name + ": " + e.err.Error() + ": " + strings.TrimSpace(e.tail)
}
func (e *exitError) Unwrap() error { return e.err }
