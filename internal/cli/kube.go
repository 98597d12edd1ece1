package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/spanperf/spanperf/internal/testbed/kube"
	"github.com/spanperf/spanperf/internal/testbed/kube/kpatch"
)

// cmdCleanKube is `spanperf clean --kube`: in every context given (default
// every context of the kubeconfig) it removes the namespaces of dead runs
// (labelled spanperf.io/run; kube.Clean says which are dead), and it
// restores the objects a dead run patched for its limits, from the run's
// ledger. It touches nothing else.
func cmdCleanKube(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("clean --kube", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("kube", true, "Kubernetes: namespaces of dead runs and objects they patched")
	run := fs.String("run", "", "only this run (removed even if its owner looks alive)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	ctxList := fs.String("context", "", "comma-separated contexts (default: every context of the kubeconfig)")
	if fs.Parse(args) != nil {
		return 2
	}
	contexts := splitList(*ctxList)
	if len(contexts) == 0 {
		var err error
		if contexts, err = kubeContexts(*kubeconfig); err != nil {
			fmt.Fprintln(stderr, "spanperf clean --kube:", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var errs []error
	var clusters []*kube.Clients
	servers := map[string]bool{} // contexts naming one API server are one cluster
	for _, c := range contexts {
		cl, err := kube.Connect(ctx, kube.SiteSpec{Kubeconfig: *kubeconfig, Context: c}, kube.DefaultConnectTimeout)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !servers[cl.Config.Host] {
			servers[cl.Config.Host] = true
			clusters = append(clusters, cl)
		}
	}
	rep, err := kube.Clean(ctx, clusters, kube.CleanOptions{Run: *run})
	errs = append(errs, err)
	for _, r := range rep.Removed {
		fmt.Fprintln(stdout, "removed", r)
	}
	for _, r := range rep.Left {
		fmt.Fprintln(stdout, "left", r)
	}
	prep, err := kpatch.Clean(ctx, kpatch.CleanOptions{Run: *run}, func(kc, kctx string) (*kube.Clients, error) {
		return kube.Connect(ctx, kube.SiteSpec{Kubeconfig: kc, Context: kctx}, kube.DefaultConnectTimeout)
	})
	errs = append(errs, err)
	for _, r := range prep.Restored {
		fmt.Fprintln(stdout, "restored", r)
	}
	for _, r := range prep.Skipped {
		fmt.Fprintln(stdout, "left", r)
	}
	if len(rep.Removed)+len(prep.Restored) == 0 {
		fmt.Fprintln(stdout, "nothing to remove")
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "spanperf clean --kube:", err)
		return 1
	}
	return 0
}

// kubeContexts lists the contexts of a kubeconfig ("" is the default
// loading rules), sorted.
func kubeContexts(kubeconfig string) ([]string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var out []string
	for name := range cfg.Contexts {
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, errors.New("kubeconfig: no contexts (give --kubeconfig or set KUBECONFIG)")
	}
	slices.Sort(out)
	return out, nil
}
