package kpatch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/testbed"
)

// Environment of the child process of TestKillThenRestoreFromLedger.
const (
	childNS     = "SPANPERF_KPATCH_CHILD_NS"
	childLedger = "SPANPERF_KPATCH_CHILD_LEDGERDIR"
	childRun    = "SPANPERF_KPATCH_CHILD_RUN"
)

// TestKillThenRestoreFromLedger: a run (a child process, this test binary
// run again) patches a Deployment and is killed with SIGKILL. Clean, as
// `spanperf clean --kube` calls it, finds the dead run's ledger, restores
// the exact original resources, removes the annotations and the ledger;
// run again, and RestoreFromLedger on the old entries, it does nothing,
// also once the object is deleted.
func TestKillThenRestoreFromLedger(t *testing.T) {
	if ns := os.Getenv(childNS); ns != "" {
		patchThenHang(t, ns)
		return
	}
	c, kc := cluster(t)
	ns := namespace(t, c)
	createDeployment(t, c, ns, "dep", nil)
	ref := Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: kc}
	waitReady(t, c, ref)
	orig, origAnn := snapshot(t, c, ref)

	dir := t.TempDir()
	old := testbed.LedgerDir
	testbed.LedgerDir = dir
	t.Cleanup(func() { testbed.LedgerDir = old })
	run := "pt" + randHex(3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKillThenRestoreFromLedger$", "-test.count=1")
	cmd.Env = append(os.Environ(), childNS+"="+ns, childLedger+"="+dir, childRun+"="+run)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	patched := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "patched" {
				patched <- true
				return
			}
		}
		patched <- false
	}()
	select {
	case ok := <-patched:
		if !ok {
			cmd.Wait()
			t.Fatal("the child ended without patching")
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child did not patch within 2 minutes")
	}
	cmd.Process.Kill() // SIGKILL: no deferred restore runs
	cmd.Wait()
	if _, ann := snapshot(t, c, ref); ann[AnnotationRun] != run {
		t.Fatalf("after the kill, annotation %s = %q, want %s", AnnotationRun, ann[AnnotationRun], run)
	}
	lp := filepath.Join(dir, run+".ledger")
	ents, err := testbed.ReadLedger(lp)
	if err != nil {
		t.Fatal(err)
	}

	rep, err := Clean(ctx, CleanOptions{Run: run}, connect)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clean: restored %v, skipped %v", rep.Restored, rep.Skipped)
	if len(rep.Restored) != 2 || !strings.Contains(rep.Restored[0], "restored deployment "+ns+"/dep container main in context "+c.Context) {
		t.Errorf("clean reported %v, want the deployment restored and the ledger removed", rep.Restored)
	}
	back, ann := snapshot(t, c, ref)
	if back != orig {
		t.Errorf("restored %s, want %s", back, orig)
	}
	if len(ann) != len(origAnn) || ann[AnnotationRun] != "" || ann[AnnotationOriginal] != "" {
		t.Errorf("annotations %v after clean, want %v", ann, origAnn)
	}
	if _, err := os.Stat(lp); !os.IsNotExist(err) {
		t.Errorf("ledger %s still there after clean (%v)", lp, err)
	}
	pods := livePods(t, c, ref)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Resources.Limits.Cpu().String() != "1" {
		t.Errorf("pods after clean: %d, want 1 with limits.cpu 1", len(pods))
	}

	// Idempotent: nothing left to clean; the old entries restore nothing,
	// also once the object is gone.
	if rep, err := Clean(ctx, CleanOptions{Run: run}, connect); err != nil || len(rep.Restored) != 0 {
		t.Errorf("second clean: %v, %v", rep.Restored, err)
	}
	if done, err := RestoreFromLedger(ctx, ents, connect); err != nil || len(done) != 0 {
		t.Errorf("restore of a restored object: %v, %v", done, err)
	}
	if err := c.Kube.AppsV1().Deployments(ns).Delete(ctx, "dep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if done, err := RestoreFromLedger(ctx, ents, connect); err != nil || len(done) != 0 {
		t.Errorf("restore of a deleted object: %v, %v", done, err)
	}
}

// patchThenHang is the child: it patches dep to 300m with a ledger of its
// own (owned by this process), says "patched", and waits to be killed.
func patchThenHang(t *testing.T, ns string) {
	testbed.LedgerDir = os.Getenv(childLedger)
	l, err := testbed.NewLedger(os.Getenv(childRun), false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := connect(os.Getenv("SPANPERF_KUBECONFIG"), strings.Split(os.Getenv("SPANPERF_KUBE_CONTEXTS"), ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Kind: Deployment, Namespace: ns, Name: "dep", Container: "main", Kubeconfig: os.Getenv("SPANPERF_KUBECONFIG")}
	if _, err := Patch(context.Background(), c, ref, mustQ("300m"), l, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	fmt.Println("patched")
	time.Sleep(3 * time.Minute) // the parent kills it long before
	t.Fatal("not killed")
}
