package netns_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/testbed/netns"
)

// RemoveNamespace deletes a namespace a datapath added, and only such a
// one; the name can be added again afterwards, and the testbed still
// closes cleanly.
func TestRemoveNamespace(t *testing.T) {
	tb := newTestbed(t, netns.Spec{})
	if err := tb.RemoveNamespace(tb.LocalSites()[0]); err == nil || !strings.Contains(err.Error(), "not one the testbed added") {
		t.Errorf("removing a site: %v, want a refusal", err)
	}
	if err := tb.RemoveNamespace(tb.WAN()); err == nil {
		t.Error("removing the wan succeeded")
	}
	for round := range 2 {
		pod, err := tb.AddNamespace("a-pod")
		if err != nil {
			t.Fatalf("round %d: add: %v", round, err)
		}
		name := pod.Namespace()
		if !exists(name) {
			t.Fatalf("%s not listed after add", name)
		}
		if err := tb.RemoveNamespace(pod); err != nil {
			t.Fatalf("round %d: remove: %v", round, err)
		}
		if exists(name) {
			t.Errorf("%s still listed after remove", name)
		}
		if err := tb.RemoveNamespace(pod); err == nil {
			t.Error("removing it twice succeeded")
		}
	}
	if err := tb.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// exists says whether the named namespace is mounted.
func exists(name string) bool {
	_, err := os.Stat(filepath.Join(netns.NetnsDir, name))
	return err == nil
}
