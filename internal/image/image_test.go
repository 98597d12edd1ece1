package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/spanperf/spanperf/internal/image"
)

// staticBinary builds a tiny Go program with CGO_ENABLED=0 that prints
// its argument, and returns its path.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(\"hello\", os.Args[1:]) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "hello", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build static binary: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

// dynamicBinary returns a binary of this machine that has a PT_INTERP
// header, checked independently of the code under test.
func dynamicBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				f.Close()
				return p
			}
		}
		f.Close()
	}
	t.Skip("this machine has no dynamically linked /bin/true or /bin/sh to refuse")
	return ""
}

func TestBuildWriteReadBack(t *testing.T) {
	bin := staticBinary(t)
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	spec := image.Spec{Binary: bin, Tag: "spanperf.local/hello:7"}
	img, err := image.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "hello.tar")
	if err := image.WriteTarball(file, spec.Tag, img); err != nil {
		t.Fatal(err)
	}

	tag, err := name.NewTag(spec.Tag)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("the tarball holds no image tagged %s: %v", spec.Tag, err)
	}
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != spec.Tag {
		t.Errorf("tarball manifest tags = %+v, want [%s]", manifest, spec.Tag)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/spanperf" {
		t.Errorf("entrypoint = %q, want [/spanperf]", got)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	layers, err := back.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "spanperf" {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
			t.Errorf("spanperf in the layer: type %c mode %o, want a regular file 0755", h.Typeflag, h.Mode)
		}
		if got, err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the layer's /spanperf (%d bytes) is not the binary (%d bytes)", len(got), len(want))
	}
	// The file taken back out of the image still runs.
	out := filepath.Join(t.TempDir(), "spanperf")
	if err := os.WriteFile(out, got, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(out, "x").Output(); err != nil || strings.TrimSpace(string(b)) != "hello [x]" {
		t.Errorf("the imaged binary printed %q, %v; want \"hello [x]\"", b, err)
	}
}

func TestDynamicBinaryRefused(t *testing.T) {
	bin := dynamicBinary(t)
	_, err := image.Build(image.Spec{Binary: bin})
	if !errors.Is(err, image.ErrNotStatic) {
		t.Fatalf("Build(%s) = %v, want ErrNotStatic", bin, err)
	}
	for _, want := range []string{bin, "dynamically linked", "CGO_ENABLED=0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestNotAnExecutableRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := image.Build(image.Spec{Binary: p})
	if err == nil || !strings.Contains(err.Error(), "not an ELF executable") || !strings.Contains(err.Error(), p) {
		t.Fatalf("Build(script) = %v, want an error naming it as not an ELF executable", err)
	}
}

func TestSpecDefaultsAndValidate(t *testing.T) {
	var s image.Spec
	s.Normalize()
	if s.Binary != "/proc/self/exe" || s.Tag != image.DefaultTag {
		t.Errorf("zero Spec normalized to %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("default spec invalid: %v", err)
	}
	for _, bad := range []string{"UPPER/case:1", "a:b:c", "x@sha256:00"} {
		if err := (image.Spec{Binary: "x", Tag: bad}).Validate(); err == nil {
			t.Errorf("tag %q accepted", bad)
		}
	}
}

// Push uploads to a real registry (go-containerregistry's, on loopback) and
// the image read back from it is the one built.
func TestPushToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := image.Build(image.Spec{Binary: staticBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/spanperf/agent:test"
	if err := image.Push(context.Background(), ref, img); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	back, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pull back %s: %v", ref, err)
	}
	want, _ := img.Digest()
	got, err := back.Digest()
	if err != nil || got != want {
		t.Errorf("pulled digest %v (%v), pushed %v", got, err, want)
	}
	if err := image.Push(context.Background(), "UPPER/x:1", img); err == nil || !strings.Contains(err.Error(), "push reference") {
		t.Errorf("bad reference: %v", err)
	}
}
