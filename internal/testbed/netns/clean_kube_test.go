package netns_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// TestCleanKeepsKubePatches: the local sweep of a dead run's ledger undoes
// its local entries but cannot restore a patched cluster object; it keeps
// the ledger with only the head and the kube-patch entry (for `spanperf
// clean --kube`) and says so.
func TestCleanKeepsKubePatches(t *testing.T) {
	requireRoot(t)
	old := testbed.LedgerDir
	testbed.LedgerDir = t.TempDir()
	t.Cleanup(func() { testbed.LedgerDir = old })
	var id [3]byte
	rand.Read(id[:])
	run := hex.EncodeToString(id[:])
	// A dead owner: a process that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", netns.Prefix+run+"-x-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	head := testbed.Entry{Kind: "run", Run: run, Owner: gone.Process.Pid, OwnerStart: 1}
	patch := testbed.Entry{Kind: testbed.KindKubePatch, Kube: &testbed.KubePatch{
		Context: "east", Kind: "Deployment", Namespace: "skupper", Name: "skupper-router", Container: "router", Original: []byte(`{"limits":{"cpu":"2"}}`),
	}}
	lp := filepath.Join(testbed.LedgerDir, run+".ledger")
	if err := testbed.RewriteLedger(lp, []testbed.Entry{head, {Kind: testbed.KindPath, Path: dir}, patch}); err != nil {
		t.Fatal(err)
	}
	rep, err := netns.Clean(netns.CleanOptions{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("path %s not removed (%v)", dir, err)
	}
	ents, err := testbed.ReadLedger(lp)
	if err != nil {
		t.Fatalf("ledger gone: %v", err)
	}
	if len(ents) != 2 || ents[0].Run != run || ents[1].Kind != testbed.KindKubePatch || string(ents[1].Kube.Original) != `{"limits":{"cpu":"2"}}` {
		t.Errorf("ledger after clean: %+v, want the head and the kube-patch entry", ents)
	}
	said := strings.Join(rep.Skipped, "\n")
	if !strings.Contains(said, "deployment skupper/skupper-router container router in context east is still patched") || !strings.Contains(said, "spanperf clean --kube") {
		t.Errorf("skipped %q does not say what is still patched", rep.Skipped)
	}
	// Again: nothing local left; the ledger stays as it is.
	if _, err := netns.Clean(netns.CleanOptions{Run: run}); err != nil {
		t.Fatal(err)
	}
	if again, _ := testbed.ReadLedger(lp); len(again) != 2 {
		t.Errorf("second clean left %d entries, want 2", len(again))
	}
}
