package nodeprobe

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
)

// Main runs `spanperf agent nodeprobe [--spec JSON] [--proc DIR]`: it
// reads the Spec from --spec or else from stdin (one JSON object), runs
// it and prints one JSON Result on stdout; exit status 0, or 1 with
// Result.Error set (and the error on stderr), or 2 on bad flags. With
// window 0 the probe stops at SIGTERM or SIGINT, or when stdin reaches
// its end after a spec read from it; with a window, a signal stops it
// early (it still prints what it measured).
//
// `spanperf agent nodeprobe --wait` does nothing until SIGTERM or SIGINT:
// the DaemonSet pod's main process, in which the probe is exec'd.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent nodeprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	specText := fs.String("spec", "", "the spec as JSON (default: read from stdin)")
	proc := fs.String("proc", "/proc", "procfs root: the host's /proc")
	wait := fs.Bool("wait", false, "wait for SIGTERM and exit (the node probe pod's main process)")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent nodeprobe: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *wait {
		<-ctx.Done()
		return 0
	}

	fail := func(err error) int {
		json.NewEncoder(stdout).Encode(&Result{Node: identify(Spec{}, *proc).Node, Error: err.Error()})
		fmt.Fprintln(stderr, err)
		return 1
	}
	var spec Spec
	var rest io.Reader // stdin after the spec
	if *specText != "" {
		if err := decodeSpec(json.NewDecoder(bytes.NewReader([]byte(*specText))), &spec); err != nil {
			return fail(fmt.Errorf("nodeprobe: --spec: %w", err))
		}
	} else {
		dec := json.NewDecoder(stdin)
		if err := decodeSpec(dec, &spec); err != nil {
			return fail(fmt.Errorf("nodeprobe: spec on stdin: %w", err))
		}
		rest = io.MultiReader(dec.Buffered(), stdin)
	}
	if spec.Window == 0 && rest != nil {
		ctx2, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			io.Copy(io.Discard, rest)
			cancel()
		}()
		ctx = ctx2
	}
	res, err := Run(ctx, spec, *proc)
	if err != nil {
		return fail(err)
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "nodeprobe: write result:", err)
		return 1
	}
	return 0
}

// decodeSpec reads one Spec from dec, refusing unknown fields.
func decodeSpec(dec *json.Decoder, s *Spec) error {
	dec.DisallowUnknownFields()
	return dec.Decode(s)
}
