package kubedp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed/kube"
)

// api is a group and the versions of it an adapter accepts, newest first,
// and the resources it needs there.
type api struct {
	group     string
	versions  []string
	resources []string
}

func (a api) String() string {
	gv := a.group + "/" + strings.Join(a.versions, "|")
	if len(a.resources) > 0 {
		gv += " (" + strings.Join(a.resources, ", ") + ")"
	}
	return gv
}

// requireAPI checks by discovery (never a cluster-wide CRD read) that
// cluster c serves one of a's versions with a's resources, and returns the
// version found; the error names the group-version, the context and the
// site, and says what provides it.
func requireAPI(name string, c *kube.Clients, site string, a api, provides string) (string, error) {
	if c == nil || c.Kube == nil {
		return "", fmt.Errorf("%s: site %s: no clients", name, site)
	}
	var missing []string
	for _, v := range a.versions {
		gv := a.group + "/" + v
		list, err := c.Kube.Discovery().ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: discover %s in context %s (site %s): %w", name, gv, c.Context, site, err)
		}
		missing = missing[:0]
		for _, r := range a.resources {
			if !slices.ContainsFunc(list.APIResources, func(ar metav1.APIResource) bool { return ar.Name == r }) {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			return v, nil
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: context %s (site %s) serves %s without %s: %s", name, c.Context, site, a.group, strings.Join(missing, ", "), provides)
	}
	return "", fmt.Errorf("%s: context %s (site %s) lacks API %s: %s", name, c.Context, site, a, provides)
}

// clusterSpec is one distinct cluster of a preflight's sites: the first
// site in it, its clients, and whether it holds the server (the last
// site) and a client (any other).
type clusterSpec struct {
	site           kube.SiteSpec
	clients        *kube.Clients
	server, client bool
}

// clusterSpecs groups a preflight's sites by cluster (context of a
// kubeconfig), in order.
func clusterSpecs(name string, sites []kube.SiteSpec, cs []*kube.Clients) ([]clusterSpec, error) {
	if len(sites) == 0 || len(cs) != len(sites) {
		return nil, fmt.Errorf("%s: preflight: %d sites, %d clusters", name, len(sites), len(cs))
	}
	var out []clusterSpec
	var keys []string
	for i, s := range sites {
		ctx := s.Context
		if cs[i] != nil && cs[i].Context != "" {
			ctx = cs[i].Context
		}
		key := s.Kubeconfig + "\x00" + ctx
		found := slices.Index(keys, key)
		if found < 0 {
			out = append(out, clusterSpec{site: s, clients: cs[i]})
			keys = append(keys, key)
			found = len(out) - 1
		}
		if i == len(sites)-1 {
			out[found].server = true
		} else {
			out[found].client = true
		}
	}
	return out, nil
}

// podSet is a kind of component pods of a solution, found by a label
// selector.
type podSet struct {
	// kind names the components: KIND@SITE.
	kind, role string
	// namespace is where the pods are; "" is the run's namespace.
	namespace string
	// selector selects the pods; "" accounts none.
	selector string
	// container is the container that carries the traffic; "" the pod.
	container string
	// agentNodes keeps only pods on the nodes of the run's agent pods (a
	// DaemonSet's, as ztunnel or the Cilium agent).
	agentNodes bool
	// serverOnly looks only in the server's cluster.
	serverOnly bool
	// option is the option that overrides selector, named in errors.
	option string
	// site, when set, looks only in the cluster of the site of that name,
	// and names the components kind (kind-i for several pods) rather than
	// kind@SITE: the components a scenario names itself (k8s-custom).
	site string
}

// listComponents finds the pods of sets in the clusters of sites and
// names them as components; a set that finds no pod is an error naming
// the selector, the namespace and the context.
func listComponents(ctx context.Context, name string, sites []Site, sets []podSet) ([]results.Component, error) {
	server, _ := serverOf(sites)
	var out []results.Component
	for _, set := range sets {
		if set.selector == "" {
			continue
		}
		in := clusters(sites)
		if set.site != "" {
			in = nil
			for _, s := range sites {
				if s.Name() == set.site {
					in = []Site{s}
				}
			}
			if len(in) == 0 {
				return nil, fmt.Errorf("%s: %s: no site %q (sites: %s)", name, set.kind, set.site, siteNames(sites))
			}
		}
		for _, s := range in {
			if set.serverOnly && !sameCluster(s, server) {
				continue
			}
			ns := set.namespace
			if ns == "" {
				ns = s.Namespace()
			}
			list, err := s.Clients().Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: set.selector})
			if err != nil {
				return nil, fmt.Errorf("%s: list %s pods (%s) in namespace %s of context %s: %w", name, set.kind, set.selector, ns, contextOf(s), err)
			}
			nodes := map[string]bool{}
			for _, o := range sites {
				if sameCluster(o, s) {
					nodes[o.Pod().Spec.NodeName] = true
				}
			}
			var pods []corev1.Pod
			for _, p := range list.Items {
				if set.agentNodes && !nodes[p.Spec.NodeName] {
					continue
				}
				if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
					continue
				}
				pods = append(pods, p)
			}
			if len(pods) == 0 {
				where := ""
				if set.agentNodes {
					where = " on the agent pods' nodes"
				}
				return nil, fmt.Errorf("%s: no running %s pods (%s) in namespace %s of context %s%s (set option %s)", name, set.kind, set.selector, ns, contextOf(s), where, set.option)
			}
			for i, p := range pods {
				n := set.kind + "@" + s.Name()
				switch {
				case set.site != "" && len(pods) > 1:
					n = fmt.Sprintf("%s-%d", set.kind, i)
				case set.site != "":
					n = set.kind
				case len(pods) > 1:
					n = fmt.Sprintf("%s-%d@%s", set.kind, i, s.Name())
				}
				out = append(out, podComponent(n, set.role, s, &p, set.container))
			}
		}
	}
	return out, nil
}

// withRefresh sets link.Refresh to find the pods of sets again (their
// pods are new after a rollout), keeping fixed (the components not found
// by a selector) first, and Alive to follow them; it returns link.
func withRefresh(link *datapath.Link, name string, sites []Site, fixed []results.Component, sets []podSet) *datapath.Link {
	fixed = slices.Clone(fixed)
	link.Refresh = func(ctx context.Context) error {
		found, err := listComponents(ctx, name, sites, sets)
		if err != nil {
			return err
		}
		comps := append(slices.Clone(fixed), found...)
		link.Components, link.Alive = comps, alive(name, sites, comps)
		return nil
	}
	return link
}

// siteNames lists the names of sites, for errors.
func siteNames(sites []Site) string {
	var out []string
	for _, s := range sites {
		out = append(out, s.Name())
	}
	return strings.Join(out, ", ")
}

// podComponent names container of pod p in site s as a component.
func podComponent(name, role string, s Site, p *corev1.Pod, container string) results.Component {
	return results.Component{
		Name: name, Role: role, Site: s.Name(),
		Context: contextOf(s), Namespace: p.Namespace, Pod: p.Name, Container: container,
		Node: p.Spec.NodeName, PodUID: string(p.UID),
	}
}

// sidecars names the container of every site's agent pod (a mesh's
// proxy) as a component; an agent pod without it is an error saying the
// injection did not happen.
func sidecars(name, container, role, hint string, sites []Site) ([]results.Component, error) {
	var out []results.Component
	for _, s := range sites {
		p := s.Pod()
		has := slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == container }) ||
			slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == container })
		if !has {
			return nil, fmt.Errorf("%s: agent pod %s/%s of site %s in context %s has no %s container: %s", name, p.Namespace, p.Name, s.Name(), contextOf(s), container, hint)
		}
		out = append(out, podComponent(container+"@"+s.Name(), role, s, p, container))
	}
	return out, nil
}

// selectorOption is an option overriding a component selector.
func selectorOption(name, def, what string) scenario.Field {
	return scenario.Field{Name: name, Kind: scenario.KindString, Default: def, Doc: "label selector of the " + what + " pods (\"\" accounts none)"}
}

// namespaceOption is an option naming the namespace of components.
func namespaceOption(name, def, what string) scenario.Field {
	return scenario.Field{Name: name, Kind: scenario.KindString, Default: def, Doc: "namespace of the " + what + " pods"}
}

// checkSelector rejects a selector that does not parse.
func checkSelector(adapter, option, sel string) error {
	if _, err := labels.Parse(sel); err != nil {
		return fmt.Errorf("%s: %s %q: %w", adapter, option, sel, err)
	}
	return nil
}

// checkName rejects a namespace or name that is not a DNS label.
func checkName(adapter, option, v string) error {
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return fmt.Errorf("%s: %s %q: %s", adapter, option, v, strings.Join(errs, "; "))
	}
	return nil
}

// declared declares a solution's components (names only setup can tell).
func declared(roles ...string) func(map[string]any, int) []scenario.Component {
	return func(map[string]any, int) []scenario.Component {
		var out []scenario.Component
		for _, r := range roles {
			out = append(out, scenario.Component{Role: r, Process: true})
		}
		return out
	}
}

// clusterLocal is the DNS name of the run's Service in a cluster.
func clusterLocal(s Site) string { return ServiceName + "." + s.Namespace() + ".svc.cluster.local" }

// aliveTimeout bounds one Alive check.
const aliveTimeout = 10 * time.Second

// alive makes a Link.Alive that checks that every pod component of comps
// still runs as the same pod (same UID, phase Running, not being
// deleted): a solution's pod evicted or restarted mid-run fails the
// trial, naming the adapter, the pod, its context and why.
func alive(name string, sites []Site, comps []results.Component) func() error {
	clients := map[string]*kube.Clients{}
	for _, s := range sites {
		clients[contextOf(s)] = s.Clients()
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), aliveTimeout)
		defer cancel()
		var errs []error
		for _, c := range comps {
			cl := clients[c.Context]
			if c.Pod == "" || cl == nil {
				continue
			}
			p, err := cl.Kube.CoreV1().Pods(c.Namespace).Get(ctx, c.Pod, metav1.GetOptions{})
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %s: pod %s/%s in context %s: %w", name, c.Name, c.Namespace, c.Pod, c.Context, err))
			case string(p.UID) != c.PodUID:
				errs = append(errs, fmt.Errorf("%s: %s: pod %s/%s in context %s was replaced (uid %s, was %s)", name, c.Name, c.Namespace, c.Pod, c.Context, p.UID, c.PodUID))
			case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning:
				why := string(p.Status.Phase)
				if p.DeletionTimestamp != nil {
					why = "being deleted"
				}
				if p.Status.Reason != "" {
					why += ": " + p.Status.Reason + " " + p.Status.Message
				}
				errs = append(errs, fmt.Errorf("%s: %s: pod %s/%s in context %s is %s", name, c.Name, c.Namespace, c.Pod, c.Context, strings.TrimSpace(why)))
			}
		}
		return errors.Join(errs...)
	}
}
