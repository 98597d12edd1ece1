// Package roottest holds the rule every test that needs root follows: as
// root it runs; as another user it fails with a clear message, so that a
// non-root `make test` cannot pass with everything skipped; under
// `go test -short` it is skipped instead, for a quick check of the logic
// that needs no root.
package roottest

import (
	"os"
	"testing"
)

// Require returns when the test runs as root. Otherwise it skips t under
// -short and fails it (t.Fatal) without, saying that the test needs root
// because it does what (e.g. "creates network namespaces").
func Require(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skipf("needs root: %s (skipped under -short)", what)
	}
	t.Fatalf("needs root: %s; run the tests as root (sudo make test), or skip this one with go test -short", what)
}
