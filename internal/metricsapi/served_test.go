package metricsapi

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestServed: a cluster that does not discover metrics.k8s.io/v1beta1 is
// ErrNotServed naming the context and what to do; one that does is
// served. (The real clusters' answer is in TestKnownBurn.)
func TestServed(t *testing.T) {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	err := Served(d, "east")
	if !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), "context east") || !strings.Contains(err.Error(), "metrics-server") {
		t.Errorf("not served: %v", err)
	}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: GroupVersion}}
	if err := Served(d, "east"); err != nil {
		t.Errorf("served: %v", err)
	}
}
