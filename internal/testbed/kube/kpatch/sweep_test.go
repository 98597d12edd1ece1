package kpatch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// TestCleanSweep: which ledgers Clean touches and what it leaves of them.
// The objects are absent (a fake API, empty), so restoring is a no-op; the
// real restores are in TestKillThenRestoreFromLedger.
func TestCleanSweep(t *testing.T) {
	old := testbed.LedgerDir
	testbed.LedgerDir = t.TempDir()
	t.Cleanup(func() { testbed.LedgerDir = old })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := testbed.Entry{Kind: "run", Owner: gone.Process.Pid, OwnerStart: 1}
	live := testbed.Entry{Kind: "run", Owner: os.Getpid()}
	live.OwnerStart, _ = testbed.ProcStart(os.Getpid())
	patch := testbed.Entry{Kind: testbed.KindKubePatch, Kube: &testbed.KubePatch{Kubeconfig: "/k", Context: "east", Kind: "Deployment", Namespace: "n", Name: "gone", Container: "c", Original: []byte("{}")}}
	local := testbed.Entry{Kind: testbed.KindPath, Path: "/tmp/spanperf-x"}
	write := func(run string, head testbed.Entry, rest ...testbed.Entry) string {
		head.Run = run
		p := filepath.Join(testbed.LedgerDir, run+".ledger")
		if err := testbed.RewriteLedger(p, append([]testbed.Entry{head}, rest...)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	onlyKube := write("aaaaa1", dead, patch)
	mixed := write("aaaaa2", dead, local, patch)
	running := write("aaaaa3", live, patch)
	noKube := write("aaaaa4", dead, local)
	var asked []string
	connect := func(kubeconfig, context string) (*kube.Clients, error) {
		asked = append(asked, kubeconfig+"|"+context)
		return &kube.Clients{Context: context, Kube: fake.NewClientset()}, nil
	}
	rep, err := Clean(context.Background(), CleanOptions{}, connect)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(onlyKube); !os.IsNotExist(err) {
		t.Errorf("ledger of only kube patches kept after restore (%v)", err)
	}
	if ents, _ := testbed.ReadLedger(mixed); len(ents) != 2 || ents[1].Kind != testbed.KindPath {
		t.Errorf("mixed ledger after clean: %+v, want head and the path", ents)
	}
	for _, p := range []string{running, noKube} {
		if ents, _ := testbed.ReadLedger(p); len(ents) != 2 {
			t.Errorf("%s: %d entries, want it untouched", p, len(ents))
		}
	}
	said := strings.Join(rep.Skipped, "\n")
	if !strings.Contains(said, "run aaaaa3: still running") || !strings.Contains(said, "run aaaaa2: its ledger still lists local things") {
		t.Errorf("skipped: %q", rep.Skipped)
	}
	if len(asked) != 2 || asked[0] != "/k|east" {
		t.Errorf("connected %v, want /k|east once per dead run with patches", asked)
	}

	// A connection that fails is an error naming the context; the ledger stays.
	p := write("aaaaa5", dead, patch)
	_, err = Clean(context.Background(), CleanOptions{Run: "aaaaa5"}, func(string, string) (*kube.Clients, error) {
		return nil, errors.New("no route to host")
	})
	if err == nil || !strings.Contains(err.Error(), "run aaaaa5: connect to context east") {
		t.Errorf("unreachable cluster: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("ledger removed although its patch was not restored: %v", err)
	}
}
