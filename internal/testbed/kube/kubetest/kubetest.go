// Package kubetest gives tests the real Kubernetes clusters they run
// against, from the environment, or skips them saying what is unset:
//
//	SPANPERF_KUBECONFIG      kubeconfig files, separated by ':' (as KUBECONFIG)
//	SPANPERF_KUBE_CONTEXTS   the contexts to use, separated by ',' (e.g. spk1,spk2)
//	SPANPERF_KUBE_IMAGE      the agent image (e.g. spanperf.local/spanperf:dev)
//
// test/kube/up.sh makes two such clusters on this machine.
package kubetest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// Env is the clusters the tests may use.
type Env struct {
	// Kubeconfig is SPANPERF_KUBECONFIG, as given (files separated by ':').
	Kubeconfig string
	// Contexts are SPANPERF_KUBE_CONTEXTS, in order.
	Contexts []string
	// Image is SPANPERF_KUBE_IMAGE.
	Image string
}

// Clusters returns the clusters from the environment, and skips t, with
// the reason, when a variable is unset or fewer than min contexts are named.
func Clusters(t testing.TB, min int) Env {
	t.Helper()
	e := Env{Kubeconfig: os.Getenv("SPANPERF_KUBECONFIG"), Image: os.Getenv("SPANPERF_KUBE_IMAGE")}
	for _, c := range strings.Split(os.Getenv("SPANPERF_KUBE_CONTEXTS"), ",") {
		if c = strings.TrimSpace(c); c != "" {
			e.Contexts = append(e.Contexts, c)
		}
	}
	switch {
	case e.Kubeconfig == "":
		t.Skip("needs real clusters: SPANPERF_KUBECONFIG is unset (test/kube/up.sh makes two; see internal/testbed/kube/kubetest)")
	case len(e.Contexts) == 0:
		t.Skip("needs real clusters: SPANPERF_KUBE_CONTEXTS is unset (e.g. spk1,spk2)")
	case e.Image == "":
		t.Skip("needs real clusters: SPANPERF_KUBE_IMAGE is unset (e.g. spanperf.local/spanperf:dev)")
	case len(e.Contexts) < min:
		t.Skipf("needs %d clusters: SPANPERF_KUBE_CONTEXTS names %d", min, len(e.Contexts))
	}
	return e
}

// Site is a site named name on the i-th context.
func (e Env) Site(name string, i int) kube.SiteSpec {
	return kube.SiteSpec{Name: name, Context: e.Contexts[i], Kubeconfig: e.Kubeconfig}
}

// RunID returns a fresh run ID starting with prefix (lowercase letters,
// digits and '-'), so that a test's namespaces are its own.
func RunID(prefix string) string {
	var b [3]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
