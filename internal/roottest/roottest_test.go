package roottest_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spanperf/spanperf/internal/roottest"
)

// probeEnv marks the child process of TestRequireAsNonRoot.
const probeEnv = "SPANPERF_ROOTTEST_PROBE"

// TestProbe is the test that TestRequireAsNonRoot runs as another user.
func TestProbe(t *testing.T) {
	if os.Getenv(probeEnv) == "" {
		t.Skip("helper of TestRequireAsNonRoot: runs only in its child process")
	}
	roottest.Require(t, "creates network namespaces")
	t.Log("ran past Require")
}

// TestRequireAsNonRoot runs this test binary as user nobody: a test that
// needs root fails there with the reason (it used to be skipped, so a
// non-root run passed with nothing tested), and under -short it is skipped.
func TestRequireAsNonRoot(t *testing.T) {
	roottest.Require(t, "runs a process as another user")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy that user nobody can read and run (go test's build directory
	// is private).
	dir, err := os.MkdirTemp("", "roottest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "roottest.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"-test.run=^TestProbe$", "-test.v"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), probeEnv+"=1", "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run as nobody: %v\n%s", err, out)
		}
		return string(out), code
	}
	out, code := run()
	if code == 0 || !strings.Contains(out, "--- FAIL: TestProbe") || !strings.Contains(out, "needs root: creates network namespaces; run the tests as root") || strings.Contains(out, "ran past Require") {
		t.Errorf("as nobody: exit %d, want a failure that says it needs root:\n%s", code, out)
	}
	out, code = run("-test.short")
	if code != 0 || !strings.Contains(out, "--- SKIP: TestProbe") || !strings.Contains(out, "needs root: creates network namespaces (skipped under -short)") {
		t.Errorf("as nobody with -short: exit %d, want a skip:\n%s", code, out)
	}
}
