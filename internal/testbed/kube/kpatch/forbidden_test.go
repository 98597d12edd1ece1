package kpatch

import (
	"context"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// TestPatchForbidden: as a ServiceAccount without a Role, Patch fails on
// get, naming the verb and the resource; with a Role that allows get but
// not patch, it fails on patch, and the ledger's entry (written first)
// restores nothing since the object was never changed.
func TestPatchForbidden(t *testing.T) {
	c, kc := cluster(t)
	ns := namespace(t, c)
	createDeployment(t, c, ns, "dep", nil)
	ref := Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: kc}
	waitReady(t, c, ref)
	orig, _ := snapshot(t, c, ref)
	ctx := context.Background()
	ledger := newLedger(t)

	sa := asServiceAccount(t, c, ns, "noperm")
	_, err := Patch(ctx, sa, ref, mustQ("250m"), ledger, 30*time.Second)
	t.Logf("no role: %v", err)
	if err == nil || !strings.Contains(err.Error(), "forbidden to get deployments.apps in namespace "+ns) {
		t.Errorf("without a role: %v, want forbidden to get deployments.apps", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "get-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}}},
	}
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "get-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "get-only"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "noperm", Namespace: ns}},
	}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC changes take effect within moments; wait (bounded) for the get.
	err = poll(ctx, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := sa.Kube.AppsV1().Deployments(ns).Get(ctx, "dep", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the get-only role did not take effect: %v", err)
	}
	_, err = Patch(ctx, sa, ref, mustQ("250m"), ledger, 30*time.Second)
	t.Logf("get-only role: %v", err)
	if err == nil || !strings.Contains(err.Error(), "forbidden to patch deployments.apps in namespace "+ns) {
		t.Errorf("with a get-only role: %v, want forbidden to patch deployments.apps", err)
	}
	if got, ann := snapshot(t, c, ref); got != orig || ann[AnnotationRun] != "" {
		t.Errorf("after the refused patch: %s %v, want %s unannotated", got, ann, orig)
	}
	ents, err := testbed.ReadLedger(ledger.Path())
	if err != nil {
		t.Fatal(err)
	}
	if done, err := RestoreFromLedger(ctx, ents, connect); err != nil || len(done) != 0 {
		t.Errorf("restore of a never-patched object: %v, %v", done, err)
	}
}

// asServiceAccount makes ServiceAccount name in ns and returns clients
// that authenticate as it (a bound token), with c's server and CA.
func asServiceAccount(t *testing.T, c *kube.Clients, ns, name string) *kube.Clients {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secs := int64(600)
	var tok *authv1.TokenRequest
	err := poll(ctx, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		var err error
		tok, err = c.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("token for serviceaccount %s/%s: %v", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tok.Status.Token
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Clients{Context: c.Context, Config: cfg, Kube: k}
}
