package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/plugins"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/runner"
	sc "github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/workload"
)

// A documented scenario is short when, run with these overrides, its trials
// hold at most maxShortWindows measurement windows (warmup + duration each;
// a trial whose workload bounds its own time, a rate sweep or connections'
// opening, counts as many as its bound holds: those are run by their own
// tests). The short ones are run for real; the others
// are parsed and planned only.
const (
	shortDuration   = 300 * time.Millisecond
	shortReps       = 1
	maxShortWindows = 12
)

// documented is a scenario the README or examples/ shows.
type documented struct {
	name  string // "README.md" or "examples/quick.yaml"
	label string // name, and for a README block the line of its fence
	src   []byte
}

// documentedScenarios returns every ```yaml block of README.md (named by
// the line of its opening fence) and every examples/*.yaml.
func documentedScenarios(t *testing.T) []documented {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs []documented
	lines := strings.Split(string(readme), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml" {
			continue
		}
		start := i
		var block []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, lines[i])
		}
		// Blank lines before the block keep the parser's line numbers
		// those of the README.
		src := strings.Repeat("\n", start+1) + strings.Join(block, "\n") + "\n"
		docs = append(docs, documented{name: "README.md", label: "README.md:" + strconv.Itoa(start+1), src: []byte(src)})
	}
	if len(docs) < 2 {
		t.Fatalf("README.md: %d yaml blocks, want the scenario and sizing examples", len(docs))
	}
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		docs = append(docs, documented{name: name, label: name, src: src})
	}
	return docs
}

// windows is how many measurement windows the plan of s holds.
func windows(t *testing.T, s *sc.Scenario) int {
	t.Helper()
	n := 0
	for _, g := range runner.Plan(s, 1) {
		for _, tr := range g.Trials {
			info, ok := plugins.Workload(tr.Point.Workload)
			if !ok {
				t.Fatalf("workload %s not registered", tr.Point.Workload)
			}
			l, ok := info.New().(workload.TrialLimiter)
			if !ok {
				n++
				continue
			}
			// A trial that bounds itself (a rate sweep's steps, connections'
			// opening) counts as many windows as its bound holds: its
			// bound, not warmup + duration, is what it may take.
			env := workload.Env{Params: tr.Point.Params, Warmup: s.Warmup, Duration: s.Duration}
			n += int((l.TrialLimit(env) + s.Warmup + s.Duration - 1) / (s.Warmup + s.Duration))
		}
	}
	return n
}

// TestDocumentedScenariosParse: every scenario the README and examples/
// show parses with the real catalog and plans trials, every datapath
// included.
func TestDocumentedScenariosParse(t *testing.T) {
	for _, d := range documentedScenarios(t) {
		s, err := sc.Parse(d.name, d.src, plugins.Catalog{})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		per := map[string]int{}
		for _, g := range runner.Plan(s, 1) {
			per[g.Datapath.Label] += len(g.Trials)
		}
		for _, l := range s.DatapathLabels() {
			if per[l] == 0 {
				t.Errorf("%s: datapath %s has no trials", d.label, l)
			}
		}
	}
}

// TestREADMEBadScenarioErrors: the errors the README shows are what the
// parser says when its scenario example is broken as described there
// (datapaths[1] "warp", workloads[0].message_size -5).
func TestREADMEBadScenarioErrors(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := documentedScenarios(t)
	example := strings.TrimLeft(string(docs[0].src), "\n")
	if !strings.HasPrefix(example, "name: quick\n") {
		t.Fatalf("%s: the first yaml block is not the scenario example:\n%s", docs[0].label, example)
	}
	bad := regexp.MustCompile(`datapaths: \[native, vxlan,`).ReplaceAllString(example, "datapaths: [native, warp,")
	bad = regexp.MustCompile(`message_size: \[1024, 131072\]`).ReplaceAllString(bad, "message_size: -5")
	if bad == example {
		t.Fatal("could not break the example as the README describes")
	}
	_, err = sc.Parse("quick.yaml", []byte(bad), plugins.Catalog{})
	if err == nil {
		t.Fatal("the broken example parsed")
	}
	want := regexp.MustCompile("(?m)^quick\\.yaml:[0-9]+: .*$").FindAllString(string(readme), -1)
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the parser says:\n%s\nthe README shows:\n%s", err, strings.Join(want, "\n"))
	}
}

// TestDocumentedScenariosRun runs the short documented scenarios (see
// maxShortWindows) through cli.Main with --reps 1 --duration 300ms: every
// trial must succeed and nothing may be left behind.
func TestDocumentedScenariosRun(t *testing.T) {
	requireRoot(t)
	ran := 0
	for _, d := range documentedScenarios(t) {
		s, err := sc.Parse(d.name, d.src, plugins.Catalog{})
		if err != nil {
			continue // TestDocumentedScenariosParse reports it
		}
		if s.IsKube() {
			t.Logf("%s: Kubernetes sites: run against the local clusters by TestKube* (make test-kube)", d.label)
			continue
		}
		if err := s.Apply(sc.Overrides{Reps: shortReps, Duration: shortDuration}, plugins.Catalog{}); err != nil {
			t.Errorf("%s: %v", d.label, err)
			continue
		}
		if n := windows(t, s); n > maxShortWindows {
			t.Logf("%s: %d measurement windows with --reps %d --duration %v, more than %d: parsed only", d.label, n, shortReps, shortDuration, maxShortWindows)
			continue
		}
		ran++
		t.Run(strings.NewReplacer("/", "_", ":", "_").Replace(d.label), func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(f, d.src, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "run")
			out, errOut, code := spanperf(t, "run", "-f", f, "--out", dir, "--reps", strconv.Itoa(shortReps), "--duration", shortDuration.String(), "--seed", "1")
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			recs, err := results.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			trials := 0
			for _, g := range runner.Plan(s, 1) {
				trials += len(g.Trials)
			}
			if len(recs) != trials {
				t.Errorf("%d records, want %d", len(recs), trials)
			}
			for _, r := range recs {
				if r.Error != "" {
					t.Errorf("trial %s failed: %s", r.TrialKey(), r.Error)
				}
			}
			if r := residue(t); len(r) > 0 {
				t.Errorf("left behind: %v", r)
			}
		})
	}
	if ran < 2 {
		t.Errorf("ran %d documented scenarios; the rule should keep at least examples/quick.yaml and examples/custom-socat.yaml short", ran)
	}
}
