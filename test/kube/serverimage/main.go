// Command serverimage builds the test server image of the Kubernetes
// harness from this host's Debian packages (nginx, postgresql-15): the
// programs, the shared libraries ldd names for them, PostgreSQL's library
// and share directories, the time zones, and an /etc/passwd and
// /etc/group with root, nobody and a non-root postgres user. No registry
// and no Docker: go-containerregistry writes a tarball that `ctr images
// import` reads. Its one shell, /bin/sh (dash), is there because initdb
// runs `postgres -V` through popen; spanperf's agent, copied in by the
// pod's init container, starts what runs there.
//
//	go run ./test/kube/serverimage -o bin/server.tar [-tag spanperf.local/server:test]
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/spanperf/spanperf/internal/image"
)

// pgDir is the PostgreSQL major version's directory (Debian 12: 15).
const pgVersion = "15"

var (
	pgBin   = "/usr/lib/postgresql/" + pgVersion + "/bin"
	pgLib   = "/usr/lib/postgresql/" + pgVersion + "/lib"
	pgShare = "/usr/share/postgresql/" + pgVersion
)

// programs are the executables in the image.
var programs = []string{"/usr/sbin/nginx", pgBin + "/initdb", pgBin + "/postgres", pgBin + "/pgbench", pgBin + "/pg_ctl"}

// trees are directories copied whole (their ELF files' libraries too).
var trees = []string{pgLib, pgShare, "/usr/share/zoneinfo"}

// skip are files of trees left out: PostgreSQL's JIT links LLVM (100 MB),
// and the tests do not use it.
var skip = regexp.MustCompile(`/llvmjit`)

// The users and groups of the image: PostgreSQL refuses to run as root,
// and nginx's workers run as nobody.
const (
	passwd = "root:x:0:0:root:/root:/nonexistent\npostgres:x:101:104:PostgreSQL:/var/lib/postgresql:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n"
	group  = "root:x:0:\npostgres:x:104:\nnogroup:x:65534:\n"
)

func main() {
	out := flag.String("o", "bin/server.tar", "tarball to write")
	tag := flag.String("tag", "spanperf.local/server:test", "the image's name in the tarball")
	flag.Parse()
	if err := build(*out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "serverimage:", err)
		os.Exit(1)
	}
}

// layer is the image's one layer as it is built: entries by path.
type layer struct {
	entries map[string]*tar.Header
	data    map[string][]byte
}

func build(out, tag string) error {
	l := &layer{entries: map[string]*tar.Header{}, data: map[string][]byte{}}
	elves := slices.Clone(programs)
	for _, p := range programs {
		if err := l.file(p, p); err != nil {
			return err
		}
	}
	if err := l.file("/bin/sh", "/usr/bin/dash"); err != nil {
		return err
	}
	elves = append(elves, "/usr/bin/dash")
	for _, t := range trees {
		err := filepath.WalkDir(t, func(p string, d fs.DirEntry, err error) error {
			if err != nil || skip.MatchString(p) {
				return err
			}
			if d.IsDir() {
				l.dir(p, 0o755, 0, 0)
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				l.parents(p)
				l.entries[p] = &tar.Header{Name: p[1:], Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}
				return nil
			}
			if strings.HasSuffix(p, ".so") {
				elves = append(elves, p)
			}
			return l.file(p, p)
		})
		if err != nil {
			return fmt.Errorf("copy %s: %w", t, err)
		}
	}
	libs, err := sharedLibs(elves)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		// The path ldd names (often a symlink) holds the library itself.
		if err := l.file(lib, lib); err != nil {
			return err
		}
	}
	l.put("/etc/passwd", []byte(passwd), 0o644)
	l.put("/etc/group", []byte(group), 0o644)
	l.put("/etc/nsswitch.conf", []byte("passwd: files\ngroup: files\nhosts: files dns\n"), 0o644)
	l.dir("/tmp", 0o1777, 0, 0)
	l.dir("/var/lib/nginx", 0o755, 0, 0)
	l.dir("/var/log/nginx", 0o755, 0, 0)
	l.dir("/var/run/postgresql", 0o2775, 101, 104)
	l.dir("/var/lib/postgresql", 0o755, 101, 104)
	return l.write(out, tag)
}

// parents adds the directories above p that are not there yet.
func (l *layer) parents(p string) {
	for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.dir(d, 0o755, 0, 0)
		}
	}
}

func (l *layer) dir(p string, mode int64, uid, gid int) {
	l.parents(p)
	l.entries[p] = &tar.Header{Name: p[1:] + "/", Typeflag: tar.TypeDir, Mode: mode, Uid: uid, Gid: gid}
}

// file adds the host's file src (symlinks followed) at p.
func (l *layer) file(p, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	l.put(p, b, int64(fi.Mode().Perm()))
	return nil
}

func (l *layer) put(p string, b []byte, mode int64) {
	l.parents(p)
	l.entries[p] = &tar.Header{Name: p[1:], Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(b))}
	l.data[p] = b
}

// sharedLibs are the libraries (and the loader) ldd names for files.
func sharedLibs(files []string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", f, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			fs := strings.Fields(line)
			switch {
			case len(fs) >= 3 && fs[1] == "=>" && strings.HasPrefix(fs[2], "/"):
				seen[fs[2]] = true
			case len(fs) >= 1 && strings.HasPrefix(fs[0], "/"):
				seen[fs[0]] = true
			}
		}
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	slices.Sort(libs)
	return libs, nil
}

// write writes the layer, in path order, as an image tarball named tag.
func (l *layer) write(out, tag string) error {
	paths := make([]string, 0, len(l.entries))
	for p := range l.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := tw.WriteHeader(l.entries[p]); err != nil {
			return err
		}
		if _, err := tw.Write(l.data[p]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ly, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, ly)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin:" + pgBin, "TZ=UTC"}, WorkingDir: "/"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := image.WriteTarball(out, tag, img); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (%d files, %.1f MB)\n", out, tag, len(paths), float64(buf.Len())/1e6)
	return nil
}
