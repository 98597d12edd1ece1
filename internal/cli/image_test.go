package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImageUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, args := range [][]string{
		{"image"},                                    // neither -o nor --push
		{"image", "-o", out, "extra"},                // stray argument
		{"image", "-o", out, "--nope"},               // unknown flag
		{"image", "-o", out, "--tag", "A:b:c"},       // not a tag
		{"image", "-o", out, "--tag", "x@sha256:00"}, // a digest is no tag
	} {
		_, errOut, code := spanperf(t, args...)
		if code != 2 || !strings.Contains(errOut, "spanperf image") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and usage or the bad tag", args, code, errOut)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a usage error wrote the tarball")
	}
}

func TestImageRefusesDynamicBinary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar")
	_, errOut, code := spanperf(t, "image", "-o", out, "--binary", "/bin/true")
	if code != 1 || !strings.Contains(errOut, "/bin/true: binary is dynamically linked") {
		t.Fatalf("exit %d, stderr %q; want 1 and a dynamic-linking error naming /bin/true", code, errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused binary left a tarball")
	}
}

// A static spanperf (CGO_ENABLED=0, as `make image` builds it) images
// itself by default, under the default tag.
func TestImageOfItself(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "spanperf")
	build := exec.Command("go", "build", "-o", static, "../../cmd/spanperf")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, b)
	}
	out := filepath.Join(dir, "spanperf.tar")
	cmd := exec.Command(static, "image", "-o", out, "--tag", "spanperf.local/spanperf:test")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spanperf image: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "wrote "+out+": spanperf.local/spanperf:test sha256:") {
		t.Errorf("stdout %q does not name the file, tag and digest", stdout.String())
	}
	tag, _ := name.NewTag("spanperf.local/spanperf:test")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want 1", len(layers), err)
	}
	fi, err := os.Stat(static)
	if err != nil {
		t.Fatal(err)
	}
	// The layer holds the binary (its size) plus a small tar overhead.
	size, err := layers[0].Size()
	if err != nil {
		t.Fatal(err)
	}
	if size < fi.Size()/4 || size > fi.Size()+64<<10 {
		t.Errorf("compressed layer %d bytes for a %d-byte binary", size, fi.Size())
	}
}
