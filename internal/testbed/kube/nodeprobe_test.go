package kube

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; got:\n%s", path, got)
	}
}

// The node probe's DaemonSet and the Role rules and namespace labels it
// needs, as YAML.
func TestNodeProbeDaemonSetGolden(t *testing.T) {
	ds := NodeProbeDaemonSet(Namespace("r1a2b3"), "r1a2b3", "spanperf.local/spanperf:dev", map[string]string{"spanperf.io/role": "bench"})
	b, err := yaml.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	var shape PodShape
	ShapeNodeProbe(&shape)
	s, err := yaml.Marshal(shape)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "nodeprobe-daemonset.golden", append(append(b, "---\n# PodShape after ShapeNodeProbe\n"...), s...))
}
