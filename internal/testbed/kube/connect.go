package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"
)

// RequestTimeout is the least time an ordinary API request (not an exec
// stream) may take: Connect sets Config.Timeout to it, or to its own
// timeout when that is longer.
const RequestTimeout = 30 * time.Second

// DefaultConnectTimeout is how long Connect waits for an API server when
// given no timeout.
const DefaultConnectTimeout = 10 * time.Second

// loadingRules are the kubeconfig loading rules for path: "" is the
// default rules ($KUBECONFIG, ~/.kube/config), a list separated by ':' is
// merged as $KUBECONFIG is (each file must exist), else the one file.
func loadingRules(path string) (*clientcmd.ClientConfigLoadingRules, string, error) {
	switch {
	case path == "":
		r := clientcmd.NewDefaultClientConfigLoadingRules()
		return r, strings.Join(r.GetLoadingPrecedence(), string(filepath.ListSeparator)), nil
	case strings.ContainsRune(path, filepath.ListSeparator):
		files := filepath.SplitList(path)
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				return nil, path, fmt.Errorf("kubeconfig %s: %w", path, err)
			}
		}
		return &clientcmd.ClientConfigLoadingRules{Precedence: files}, path, nil
	}
	return &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, path, nil
}

// quietKlog silences klog once.
var quietKlog sync.Once

// Connect makes the clients of site's context, and checks that its API
// server answers within timeout (DefaultConnectTimeout when 0). Kubeconfig
// may be a list of files separated by ':', merged as $KUBECONFIG is.
// Errors name the kubeconfig and the context: an unreadable kubeconfig, an
// unknown context, an API server that does not answer (with its URL).
func Connect(ctx context.Context, site SiteSpec, timeout time.Duration) (*Clients, error) {
	quietKlog.Do(func() {
		// client-go logs through klog to stderr (e.g. the WebSocket
		// executor's "Unknown stream id"); spanperf reports its errors
		// itself.
		klog.SetLogger(logr.Discard())
	})
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	rules, where, err := loadingRules(site.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: site.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", where, err)
	}
	name := site.Context
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return nil, fmt.Errorf("kubeconfig %s: no current context, and the site names none", where)
	}
	if _, ok := raw.Contexts[name]; !ok {
		var names []string
		for n := range raw.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("kubeconfig %s: no context %q (contexts: %s)", where, name, strings.Join(names, ", "))
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: context %s: %w", where, name, err)
	}
	cfg.Timeout = max(timeout, RequestTimeout)
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: context %s: %w", where, name, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: context %s: %w", where, name, err)
	}
	c := &Clients{Context: name, Config: cfg, Kube: kc, Dynamic: dc}
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := kc.Discovery().RESTClient().Get().AbsPath("/version").Do(vctx).Error(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("context %s: API server %s: %w", name, cfg.Host, ctx.Err())
		}
		if vctx.Err() != nil {
			return nil, fmt.Errorf("kubeconfig %s: context %s: API server %s did not answer within %v: %w", where, name, cfg.Host, timeout, err)
		}
		return nil, fmt.Errorf("kubeconfig %s: context %s: API server %s: %w", where, name, cfg.Host, err)
	}
	return c, nil
}

// String names the clients' context, for errors.
func (c *Clients) String() string { return "context " + c.Context }

// apiError wraps err from verb on resource (in namespace ns, when not "")
// with the context: "context spk1: create pods/exec in spanperf-x: ...".
func (c *Clients) apiError(verb, resource, ns string, err error) error {
	where := ""
	if ns != "" {
		where = " in " + ns
	}
	if apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "forbidden") {
		err = fmt.Errorf("forbidden: %w", err)
	}
	return fmt.Errorf("context %s: %s %s%s: %w", c.Context, verb, resource, where, err)
}

// Exec runs argv in container of pod in namespace ns, streaming stdin (may
// be nil), stdout and stderr (nil discards them), and returns when the
// command exits (an error carrying its exit status when it is not 0, see
// ExitStatus) or ctx ends. Cancelling ctx ends the stream, not the remote
// process. It speaks WebSocket and falls back to SPDY, as kubectl does.
func (c *Clients) Exec(ctx context.Context, ns, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	req := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Name(pod).Namespace(ns).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	// A stream lives as long as its command: no request timeout.
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = 0
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return c.apiError("create", "pods/exec", ns, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return c.apiError("create", "pods/exec", ns, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return c.apiError("create", "pods/exec", ns, err)
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err == nil {
		return nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("context %s: exec %s in %s/%s: exit status %d: %w", c.Context, argv[0], ns, pod, ee.ExitStatus(), err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("context %s: exec %s in %s/%s: %w", c.Context, argv[0], ns, pod, errors.Join(ctx.Err(), err))
	}
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden") {
		return c.apiError("create", "pods/exec", ns, err)
	}
	return fmt.Errorf("context %s: exec %s in %s/%s: %w", c.Context, argv[0], ns, pod, err)
}

// ExitStatus returns the exit status that an error of Exec carries, when
// the command ran and exited non-zero.
func ExitStatus(err error) (int, bool) {
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), true
	}
	return 0, false
}
