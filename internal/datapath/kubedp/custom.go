package kubedp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// CustomName is the name of the adapter for a solution spanperf has no
// adapter for.
const CustomName = "k8s-custom"

// DefaultCustomRole is a custom component's role when the scenario gives
// none.
const DefaultCustomRole = "relay"

// CustomComponent is one kind of pod of the user's solution: the pods in
// Namespace of Site's cluster that Selector selects.
type CustomComponent struct {
	// Name names the component in records and limits (Name-i when the
	// selector finds several pods).
	Name string
	// Site is the scenario site whose cluster runs the pods.
	Site string
	// Namespace is where the pods are.
	Namespace string
	// Selector is a label selector of the pods.
	Selector string
	// Container is the container that carries the traffic ("" the pod; a
	// limit then needs the pod to have one container).
	Container string
	// Role is what it does on the path; default DefaultCustomRole.
	Role string
}

// Custom exposes the server through a solution the user installed and
// spanperf knows nothing of: the client dials Target, and the solution's
// pods are the Components the scenario lists. Target may name, in braces,
// {server_node_ip} (the server agent pod's node IP), {server_pod_ip},
// {namespace} (the run's namespace in the server's cluster) and {port}
// (the agent server's port, ServicePort): "{server_node_ip}:18080",
// "relay.{namespace}.svc.cluster.local:{port}".
type Custom struct {
	// Target is the HOST:PORT template the client dials.
	Target string
	// HostNetwork puts the agent pods on their nodes' network, as
	// k8s-hostnet does.
	HostNetwork bool
	// Components are the solution's pods.
	Components []CustomComponent
}

var (
	_ datapath.Datapath = (*Custom)(nil)
	_ kube.Shaper       = (*Custom)(nil)
	_ kube.Preflighter  = (*Custom)(nil)
)

// customComponentFields are the keys of an entry of k8s-custom's
// components.
var customComponentFields = []scenario.Field{
	{Name: "name", Kind: scenario.KindString, Required: true, Doc: "the component's name in records and limits"},
	{Name: "site", Kind: scenario.KindString, Required: true, Doc: "the site whose cluster runs the pods"},
	{Name: "namespace", Kind: scenario.KindString, Required: true, Doc: "the pods' namespace"},
	{Name: "selector", Kind: scenario.KindString, Required: true, Doc: "label selector of the pods"},
	{Name: "container", Kind: scenario.KindString, Doc: "the container that carries the traffic (default: the pod's only one)"},
	{Name: "role", Kind: scenario.KindString, Doc: "what it does on the path (default relay)"},
}

// CustomInfo registers Custom.
func CustomInfo() datapath.Info {
	return datapath.Info{
		Name:    CustomName,
		Summary: "Kubernetes: a solution spanperf has no adapter for; the client dials target, its pods are the components listed",
		Options: []scenario.Field{
			{Name: "target", Kind: scenario.KindString, Required: true, Doc: "HOST:PORT the client dials; {server_node_ip}, {server_pod_ip}, {namespace} and {port} are filled in"},
			{Name: "host_network", Kind: scenario.KindBool, Default: false, Doc: "run the agent pods on their nodes' network (as k8s-hostnet)"},
			{Name: "components", Kind: scenario.KindRecords, Record: customComponentFields, Doc: "the solution's pods: a list of {name, site, namespace, selector, container, role}"},
		},
		New: func(o map[string]any) (datapath.Datapath, error) {
			c := customFrom(o)
			return c, c.Validate()
		},
		CheckOptions: func(o map[string]any) error { return customFrom(o).Validate() },
		Components: func(o map[string]any, _ int) []scenario.Component {
			c := customFrom(o)
			if len(c.Components) == 0 {
				return kernelDeclared(o, 0)
			}
			var out []scenario.Component
			for _, cc := range c.Components {
				out = append(out, scenario.Component{Name: cc.Name, Role: cc.Role, Process: true})
			}
			return out
		},
		Kube: true,
	}
}

// customFrom makes a Custom of its options as the scenario decoded them.
func customFrom(o map[string]any) *Custom {
	c := &Custom{Target: stringOpt(o, "target")}
	c.HostNetwork, _ = o["host_network"].(bool)
	recs, _ := o["components"].([]map[string]any)
	for _, r := range recs {
		cc := CustomComponent{
			Name: stringOpt(r, "name"), Site: stringOpt(r, "site"), Namespace: stringOpt(r, "namespace"),
			Selector: stringOpt(r, "selector"), Container: stringOpt(r, "container"), Role: stringOpt(r, "role"),
		}
		if cc.Role == "" {
			cc.Role = DefaultCustomRole
		}
		c.Components = append(c.Components, cc)
	}
	return c
}

// Validate reports options the adapter cannot use; each error is a
// scenario.FieldError naming its key.
func (c *Custom) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &scenario.FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	// An empty target is refused by the parser (a required option) and by
	// Preflight; New accepts it, as `spanperf doctor` makes every adapter
	// of its defaults alone.
	if _, _, err := splitTemplate(c.Target); err != nil && c.Target != "" {
		bad("target", "%v", err)
	}
	names := map[string]int{}
	for i, cc := range c.Components {
		at := func(k string) string { return fmt.Sprintf("components[%d].%s", i, k) }
		if j, dup := names[cc.Name]; dup {
			bad(at("name"), "duplicate name %q (also components[%d])", cc.Name, j)
		}
		names[cc.Name] = i
		if !customName.MatchString(cc.Name) {
			bad(at("name"), "%q: want letters, digits and . _ - (a limit key names it)", cc.Name)
		}
		if err := checkName(CustomName, "namespace", cc.Namespace); err != nil {
			bad(at("namespace"), "%q is not a namespace name", cc.Namespace)
		}
		if err := checkSelector(CustomName, "selector", cc.Selector); err != nil || strings.TrimSpace(cc.Selector) == "" {
			bad(at("selector"), "%q is not a label selector (want k=v,...)", cc.Selector)
		}
	}
	return errors.Join(errs...)
}

var errNoTarget = fmt.Errorf("%s: option target is required: the HOST:PORT the client dials", CustomName)

// customName matches a component name: a limit key without @ or :.
var customName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// customTemplates are the names Target may hold in braces.
var customTemplates = []string{"server_node_ip", "server_pod_ip", "namespace", "port"}

// splitTemplate checks a target template and splits it into host and port
// templates.
func splitTemplate(t string) (host, port string, err error) {
	if t == "" {
		return "", "", errors.New(`want HOST:PORT (e.g. "{server_node_ip}:18080")`)
	}
	rest := t
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", "", fmt.Errorf("%q: unclosed {", t)
		}
		if name := rest[i+1 : i+j]; !slices.Contains(customTemplates, name) {
			return "", "", fmt.Errorf("%q: unknown {%s} (known: {%s})", t, name, strings.Join(customTemplates, "}, {"))
		}
		rest = rest[i+j+1:]
	}
	host, port, err = net.SplitHostPort(t)
	if err != nil || host == "" || port == "" {
		return "", "", fmt.Errorf("%q: want HOST:PORT", t)
	}
	if port != "{port}" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", fmt.Errorf("%q: port %q is not a number 1-65535 or {port}", t, port)
		}
	}
	return host, port, nil
}

// fillTarget fills the templates of t for the server site.
func (c *Custom) fillTarget(server Site) (testbed.Target, error) {
	p := server.Pod()
	r := strings.NewReplacer("{server_node_ip}", p.Status.HostIP, "{server_pod_ip}", p.Status.PodIP,
		"{namespace}", server.Namespace(), "{port}", strconv.Itoa(ServicePort))
	host, port, err := net.SplitHostPort(r.Replace(c.Target))
	if err != nil {
		return testbed.Target{}, fmt.Errorf("%s: target %q: %w", CustomName, c.Target, err)
	}
	n, err := strconv.Atoi(port)
	if host == "" || err != nil {
		return testbed.Target{}, fmt.Errorf("%s: target %q is %s:%s for pod %s/%s in context %s (no IP yet?)", CustomName, c.Target, host, port, p.Namespace, p.Name, contextOf(server))
	}
	return testbed.Target{Host: host, Port: n}, nil
}

// Shape puts the agent pods on the host network when asked.
func (c *Custom) Shape(s *kube.PodShape) {
	if c.HostNetwork {
		s.HostNetwork = true
	}
}

// Preflight checks that every component's site is a site of the run and
// that its selector selects at least one running pod in its namespace of
// that site's cluster.
func (c *Custom) Preflight(ctx context.Context, sites []kube.SiteSpec, cs []*kube.Clients) error {
	if c.Target == "" {
		return errNoTarget
	}
	if len(cs) != len(sites) {
		return fmt.Errorf("%s: preflight: %d sites, %d clusters", CustomName, len(sites), len(cs))
	}
	var errs []error
	for _, cc := range c.Components {
		i := -1
		var names []string
		for j, s := range sites {
			names = append(names, s.Name)
			if s.Name == cc.Site {
				i = j
			}
		}
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s: component %s: no site %q (sites: %s)", CustomName, cc.Name, cc.Site, strings.Join(names, ", ")))
			continue
		}
		cl := cs[i]
		if cl == nil || cl.Kube == nil {
			errs = append(errs, fmt.Errorf("%s: component %s: site %s has no clients", CustomName, cc.Name, cc.Site))
			continue
		}
		list, err := cl.Kube.CoreV1().Pods(cc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: cc.Selector})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: component %s: list pods (%s) in namespace %s of context %s: %w", CustomName, cc.Name, cc.Selector, cc.Namespace, cl.Context, err))
			continue
		}
		running := 0
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running == 0 {
			errs = append(errs, fmt.Errorf("%s: component %s: no running pod matches selector %s in namespace %s of context %s (site %s; %d pods, none running)", CustomName, cc.Name, cc.Selector, cc.Namespace, cl.Context, cc.Site, len(list.Items)))
		}
	}
	return errors.Join(errs...)
}

// Setup creates nothing: the user's solution exposes the server; the
// client dials the filled-in Target.
func (c *Custom) Setup(ctx context.Context, tb testbed.Testbed) (*datapath.Link, error) {
	return setupOn(ctx, CustomName, c, tb)
}

// podSets are the component pods as listComponents finds them.
func (c *Custom) podSets() []podSet {
	var out []podSet
	for _, cc := range c.Components {
		out = append(out, podSet{kind: cc.Name, role: cc.Role, namespace: cc.Namespace, selector: cc.Selector,
			container: cc.Container, site: cc.Site, option: "components"})
	}
	return out
}

func (c *Custom) setup(ctx context.Context, sites []Site) (*datapath.Link, error) {
	if c.Target == "" {
		return nil, errNoTarget
	}
	server, _ := serverOf(sites)
	if c.HostNetwork && !server.Pod().Spec.HostNetwork {
		return nil, fmt.Errorf("%s: pod %s/%s of site %s in context %s is not on the host network (the testbed did not apply Shape)", CustomName, server.Namespace(), server.Pod().Name, server.Name(), contextOf(server))
	}
	target, err := c.fillTarget(server)
	if err != nil {
		return nil, err
	}
	var fixed []results.Component
	if len(c.Components) == 0 {
		fixed = kernelOnly()
	}
	link := withRefresh(&datapath.Link{
		Target: targetsTo(server, target),
		Close:  func(context.Context) error { return nil },
	}, CustomName, sites, fixed, c.podSets())
	if err := link.Refresh(ctx); err != nil {
		return nil, err
	}
	return link, nil
}
