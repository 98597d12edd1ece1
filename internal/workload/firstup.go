package workload

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/testbed"
)

// firstUpProbe is `agent firstup` started in a site and waiting for its
// target on standard input: tunnel-up and discovery start it before what
// they time, so that its own start is not timed.
type firstUpProbe struct {
	p   testbed.Process
	in  *io.PipeWriter
	out *testbed.SyncBuffer
}

// startFirstUp starts the probe in site and waits until it is ready.
func startFirstUp(ctx context.Context, site testbed.Site, interval, timeout time.Duration) (*firstUpProbe, error) {
	pr, pw := io.Pipe()
	out := &testbed.SyncBuffer{}
	cmd := agent.Command("agent-firstup", "firstup", "--interval", interval.String(), "--timeout", timeout.String())
	cmd.Stdin, cmd.Stdout = pr, out
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("probe: %w", err)
	}
	fp := &firstUpProbe{p: p, in: pw, out: out}
	if err := waitLine(ctx, p, out, 10*time.Second); err != nil {
		fp.stop()
		return nil, fmt.Errorf("probe: %w", err)
	}
	return fp, nil
}

// start hands the probe its target: it starts probing at once.
func (f *firstUpProbe) start(target testbed.Target) error {
	// Closing the pipe after the line lets the process's Wait finish.
	defer f.in.Close()
	if _, err := io.WriteString(f.in, target.String()+"\n"); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// result waits for the probe to finish and returns what it found.
func (f *firstUpProbe) result(ctx context.Context) (agent.FirstUp, error) {
	var fu agent.FirstUp
	select {
	case <-f.p.Done():
	case <-ctx.Done():
		return fu, ctx.Err()
	}
	if err := lastJSONLine(f.out.String(), &fu); err != nil {
		return fu, fmt.Errorf("%w: %v: %s", err, f.p.Wait(), f.p.Tail())
	}
	return fu, nil
}

// stop ends the probe, whatever it is doing.
func (f *firstUpProbe) stop() {
	f.in.Close()
	f.p.Stop(time.Second)
}
