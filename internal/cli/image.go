package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spanperf/spanperf/internal/image"
)

const imageUsage = "usage: spanperf image -o FILE [--tag REF] [--binary PATH] [--push REF]"

// cmdImage builds the agent image: a tarball (-o), a push (--push), or both.
func cmdImage(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the image as a tarball to FILE (for `ctr -n k8s.io images import` or `docker load`)")
	tag := fs.String("tag", "", "image name in the tarball (default "+image.DefaultTag+")")
	bin := fs.String("binary", "", "static binary to image (default: this spanperf)")
	push := fs.String("push", "", "push the image to this registry reference (credentials: the default keychain)")
	if fs.Parse(args) != nil || fs.NArg() != 0 || (*out == "" && *push == "") {
		fmt.Fprintln(stderr, imageUsage)
		return 2
	}
	spec := image.Spec{Binary: *bin, Tag: *tag}
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		fmt.Fprintln(stderr, "spanperf image:", err)
		return 2
	}
	img, err := image.Build(spec)
	if err != nil {
		fmt.Fprintln(stderr, "spanperf image:", err)
		return 1
	}
	digest, err := img.Digest()
	if err != nil {
		fmt.Fprintln(stderr, "spanperf image:", err)
		return 1
	}
	if *out != "" {
		if err := image.WriteTarball(*out, spec.Tag, img); err != nil {
			os.Remove(*out)
			fmt.Fprintln(stderr, "spanperf image:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s: %s %s\n", *out, spec.Tag, digest)
	}
	if *push != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := image.Push(ctx, *push, img); err != nil {
			fmt.Fprintln(stderr, "spanperf image:", err)
			return 1
		}
		fmt.Fprintf(stdout, "pushed %s %s\n", *push, digest)
	}
	return 0
}
