package kubedp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// TestEndToEnd runs rr through each baseline on a real Kubernetes testbed
// (kube.New): the server agent in the last site, the client exec'd in the
// first, dialling Link.Target: k8s-pod, k8s-hostnet and k8s-nodeport from
// the first test cluster to the last, k8s-clusterip inside the first. It
// skips until the Kubernetes testbed is implemented (kube.New answers
// "not implemented").
func TestEndToEnd(t *testing.T) {
	cs := clustersOf(t)
	img := os.Getenv("SPANPERF_KUBE_IMAGE")
	if img == "" {
		t.Skip("SPANPERF_KUBE_IMAGE unset: no agent image")
	}
	for _, tc := range []struct {
		name string
		same bool
	}{{PodName, false}, {HostNetName, false}, {NodePortName, false}, {ClusterIPName, true}} {
		t.Run(tc.name, func(t *testing.T) {
			server := cs[len(cs)-1]
			if tc.same {
				server = cs[0]
			}
			b := make([]byte, 3)
			_, _ = rand.Read(b)
			spec := kube.Spec{
				Run: "adtest-e2e-" + hex.EncodeToString(b), Image: img, ShareNode: tc.same,
				Sites: []kube.SiteSpec{
					{Name: "east", Context: cs[0].Context, Kubeconfig: os.Getenv("SPANPERF_KUBECONFIG")},
					{Name: "west", Context: server.Context, Kubeconfig: os.Getenv("SPANPERF_KUBECONFIG")},
				},
			}
			dp := newAdapter(t, tc.name, nil)
			if sh, ok := dp.(kube.Shaper); ok {
				sh.Shape(&spec.Shape)
			}
			ctx := testCtx(t, 3*time.Minute)
			if err := dp.(kube.Preflighter).Preflight(ctx, spec.Sites, []*kube.Clients{cs[0], server}); err != nil {
				t.Fatal(err)
			}
			tb, err := kube.New(ctx, spec)
			if err != nil && strings.Contains(err.Error(), "not implemented") {
				t.Skip("the Kubernetes testbed is not implemented on this branch yet")
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := tb.Close(); err != nil {
					t.Errorf("close testbed: %v", err)
				}
			})
			link, err := datapath.Build(ctx, tc.name, dp, tb)
			if err != nil {
				t.Fatal(err)
			}
			defer closeLink(t, link)
			sites := tb.Sites()
			client, srvSite := sites[0], sites[len(sites)-1]
			srv, err := srvSite.Exec(ctx, agent.Command("server", "serve", "--listen", ":7100"))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop(2 * time.Second)
			target := link.Target(client, srvSite, agent.DefaultPort)
			t.Logf("%s: east dials %s", tc.name, target)
			rec, err := rrThrough(ctx, client, target)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.0f transactions/s", tc.name, rec.Metrics[results.TransactionsPerS])
		})
	}
}

// rrThrough runs a 1 s rr from client to target, retrying (bounded) while
// the server starts.
func rrThrough(ctx context.Context, client testbed.Site, target testbed.Target) (results.Record, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out, errOut bytes.Buffer
		cmd := agent.Command("client", "client", "--mode", "rr", "--target", target.String(), "--duration", "1s", "--request-size", "64", "--response-size", "64")
		cmd.Stdout, cmd.Stderr = &out, &errOut
		p, err := client.Exec(ctx, cmd)
		if err == nil {
			err = p.Wait()
		}
		var rec results.Record
		if err == nil {
			err = json.Unmarshal(out.Bytes(), &rec)
		}
		if err == nil && rec.Error == "" && rec.Metrics[results.TransactionsPerS] > 0 {
			return rec, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("rr through %s: %s %s", target, rec.Error, strings.TrimSpace(errOut.String()))
			}
			return rec, err
		}
		time.Sleep(time.Second)
	}
}
