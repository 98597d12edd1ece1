// Package image builds the OCI image a Kubernetes run starts its agents
// from: one static binary (by default the running spanperf) at /spanperf,
// written as a tarball that `ctr images import` and `docker load` read, or
// pushed to a registry. No Docker is needed.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/spanperf/spanperf/internal/version"
)

// Path is where the binary sits in the image; the entrypoint is [Path].
const Path = "/spanperf"

// DefaultTag is the image name a tarball carries when none is given.
var DefaultTag = "spanperf.local/spanperf:" + version.Version

// ErrNotStatic says the binary needs a dynamic loader, which the image
// (one file, no libc) does not have.
var ErrNotStatic = errors.New("binary is dynamically linked")

// Spec says what image to build. Its zero value images the running spanperf.
type Spec struct {
	// Binary is the static executable to image; empty means the running
	// program (/proc/self/exe).
	Binary string
	// Tag names the image in a tarball (repository:tag); empty means
	// DefaultTag.
	Tag string
}

// Normalize fills the defaults.
func (s *Spec) Normalize() {
	if s.Binary == "" {
		s.Binary = "/proc/self/exe"
	}
	if s.Tag == "" {
		s.Tag = DefaultTag
	}
}

// Validate checks that Tag is a tag reference.
func (s Spec) Validate() error {
	if _, err := name.NewTag(s.Tag); err != nil {
		return fmt.Errorf("tag %q: %w", s.Tag, err)
	}
	return nil
}

// Build returns the image of s.Binary: one layer holding the binary at
// Path (mode 0755) and an empty /tmp, entrypoint [Path], the OS and
// architecture read from the ELF header. A binary that is not a static
// ELF executable is refused (ErrNotStatic for a dynamic one).
func Build(s Spec) (v1.Image, error) {
	s.Normalize()
	arch, err := CheckStatic(s.Binary)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	layerTar, err := layerBytes(data)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config = v1.Config{Entrypoint: []string{Path}, Env: []string{"PATH=/"}, WorkingDir: "/"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// layerBytes is the layer's tar: /tmp (1777) and the binary at Path.
func layerBytes(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []struct {
		h    tar.Header
		data []byte
	}{
		{tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}, nil},
		{tar.Header{Name: Path[1:], Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}, bin},
	}
	for _, f := range hdrs {
		if err := tw.WriteHeader(&f.h); err != nil {
			return nil, fmt.Errorf("image layer %s: %w", f.h.Name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image layer %s: %w", f.h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// CheckStatic returns the OCI architecture of the ELF executable at path,
// or an error if it is not one or needs a dynamic loader (a PT_INTERP
// program header; ErrNotStatic).
func CheckStatic(path string) (arch string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("binary %s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s: %w (it needs a loader the image lacks; build it with CGO_ENABLED=0, as `make image` does)", path, ErrNotStatic)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "386", nil
	case elf.EM_ARM:
		return "arm", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	}
	return "", fmt.Errorf("binary %s: unknown ELF machine %v", path, f.Machine)
}

// WriteTarball writes img as a tarball named tag (repository:tag) to file,
// the format `ctr -n k8s.io images import` and `docker load` read.
func WriteTarball(file, tag string, img v1.Image) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(file, t, img); err != nil {
		return fmt.Errorf("write image %s: %w", file, err)
	}
	return nil
}

// Push uploads img to the registry reference ref, with credentials from
// the default keychain (docker config, credential helpers).
func Push(ctx context.Context, ref string, img v1.Image) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
