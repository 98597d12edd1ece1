package scenario

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// maxPoints bounds the matrix of one workload entry.
const maxPoints = 10000

// Normalize fills in every default: the top-level settings left at zero
// (except Warmup, where zero means none), each datapath's Label and absent
// options, the Baseline, and each workload's absent parameters, from the
// Field.Default given by cat (as a one-element list for parameters).
// Normalize is idempotent.
func (s *Scenario) Normalize(cat Catalog) {
	if len(s.SiteList) > 0 {
		s.Sites = len(s.SiteList)
	}
	if s.Sites == 0 {
		s.Sites = 2
	}
	if len(s.SiteList) > 0 && s.Kube.Probe == "" {
		s.Kube.Probe = ProbeNone
	}
	if s.WAN.MTU == 0 {
		s.WAN.MTU = 1500
	}
	if s.Topology == "" || s.Topology == "direct" {
		s.Topology = Topologies[0]
	}
	if s.Repetitions == 0 {
		s.Repetitions = 3
	}
	if s.Duration == 0 {
		s.Duration = 10 * time.Second
	}
	if s.Energy.WattsPerCore == 0 {
		s.Energy.WattsPerCore = DefaultWattsPerCore
	}
	if s.ProbeInterval == 0 {
		s.ProbeInterval = 200 * time.Millisecond
	}
	for i := range s.Datapaths {
		d := &s.Datapaths[i]
		if d.Label == "" {
			d.Label = d.Name
		}
		fields, _ := cat.DatapathFields(d.Name)
		for _, f := range fields {
			if _, ok := d.Options[f.Name]; ok || f.Default == nil {
				continue
			}
			if d.Options == nil {
				d.Options = map[string]any{}
			}
			d.Options[f.Name] = canon(f.Kind, f.Default)
		}
	}
	if s.Baseline == "" && len(s.Datapaths) > 0 {
		s.Baseline = s.Datapaths[0].Label
	}
	if cl, ok := cat.(ComponentLister); ok && len(s.Limits) > 0 {
		// A copy: Apply normalizes a shallow copy of s, which must leave s
		// alone on error.
		lims := make(map[string]Limit, len(s.Limits))
		for key, l := range s.Limits {
			l.Datapaths, _ = s.limitTargets(cl, key)
			lims[key] = l
		}
		s.Limits = lims
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		fields, _ := cat.WorkloadFields(w.Type)
		for _, f := range fields {
			if _, ok := w.Params[f.Name]; ok || f.Default == nil {
				continue
			}
			if w.Params == nil {
				w.Params = map[string][]any{}
			}
			w.Params[f.Name] = []any{canon(f.Kind, f.Default)}
		}
	}
}

// isMesh says whether the topology is the mesh, by its name or its old
// name (direct), or unset.
func (s *Scenario) isMesh() bool {
	return s.Topology == "" || s.Topology == Topologies[0] || s.Topology == "direct"
}

// Validate checks a normalized scenario against cat: the rules Parse
// applies to values, without line numbers. It reports every problem, each
// as "scenario FILE: KEY: message", joined with errors.Join.
func (s *Scenario) Validate(cat Catalog) error {
	var errs []error
	for _, pr := range s.problems(cat) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", s.what(), pr.key(), pr.msg))
	}
	return errors.Join(errs...)
}

// what names s in messages.
func (s *Scenario) what() string {
	switch {
	case s.File != "":
		return "scenario " + s.File
	case s.Name != "":
		return "scenario " + s.Name
	}
	return "scenario"
}

// problem is one thing Validate finds wrong.
type problem struct {
	// subject is the key path of the wrong thing, shown unless at is set.
	subject string
	// at is the key path to show instead, e.g. the mapping missing a key.
	at  string
	msg string
}

func (p problem) key() string {
	if p.at != "" {
		return p.at
	}
	return p.subject
}

// checkTop returns what is wrong with the decoded value v of the top-level
// setting at key path key, or "".
func checkTop(key string, v any) string {
	switch x := v.(type) {
	case int64:
		lo, hi := int64(0), int64(-1)
		switch key {
		case "sites":
			lo = 2
		case "wan.mtu":
			lo, hi = 576, 65535
		case "repetitions":
			lo = 1
		}
		if x < lo {
			return fmt.Sprintf("must be ≥ %d, got %d", lo, x)
		}
		if hi >= 0 && x > hi {
			return fmt.Sprintf("must be ≤ %d, got %d", hi, x)
		}
	case float64:
		switch {
		case key == "energy.watts_per_core" && !(x > 0 && x < 1e9):
			return fmt.Sprintf("must be > 0 and < 1e9 watts, got %v", x)
		case key == "energy.idle_watts" && !(x >= 0 && x < 1e9):
			return fmt.Sprintf("must be ≥ 0 and < 1e9 watts, got %v", x)
		}
	case time.Duration:
		if key == "duration" && x <= 0 {
			return fmt.Sprintf("must be > 0, got %v", x)
		}
		if key == "probe_interval" && x < 10*time.Millisecond {
			return fmt.Sprintf("must be ≥ 10ms, got %v", x)
		}
		if x < 0 {
			return fmt.Sprintf("must be ≥ 0s, got %v", x)
		}
	}
	return ""
}

func (s *Scenario) problems(cat Catalog) []problem {
	var ps []problem
	add := func(subject, at, format string, args ...any) {
		ps = append(ps, problem{subject, at, fmt.Sprintf(format, args...)})
	}
	for key, v := range map[string]any{
		"sites":                 int64(s.Sites),
		"wan.mtu":               int64(s.WAN.MTU),
		"wan.rate":              s.WAN.RateBPS,
		"repetitions":           int64(s.Repetitions),
		"duration":              s.Duration,
		"warmup":                s.Warmup,
		"energy.idle_watts":     s.Energy.IdleWatts,
		"energy.watts_per_core": s.Energy.WattsPerCore,
		"probe_interval":        s.ProbeInterval,
	} {
		if msg := checkTop(key, v); msg != "" {
			add(key, "", "%s", msg)
		}
	}
	if !slices.Contains(Topologies, s.Topology) {
		add("topology", "", "must be one of %s (direct is mesh's old name), got %q", strings.Join(Topologies[:4], ", "), s.Topology)
	}
	ps = append(ps, s.wanProblems()...)
	slices.SortFunc(ps, func(a, b problem) int { return strings.Compare(a.subject, b.subject) })

	ndp := len(ps)
	if len(s.Datapaths) == 0 {
		add("datapaths", "", "must list at least one datapath")
	}
	labels := map[string]int{}
	for i, d := range s.Datapaths {
		path := index("datapaths", i)
		fields, ok := cat.DatapathFields(d.Name)
		switch {
		case d.Name == "":
			add(path+".name", path, `missing required key "name"`)
		case !ok:
			add(path, "", "unknown datapath %q%s", d.Name, knownNames(cat, false, s.IsKube()))
		default:
			opts := make(map[string][]any, len(d.Options))
			for k, v := range d.Options {
				opts[k] = []any{v}
			}
			n := len(ps)
			ps = append(ps, checkParams(path, fields, opts, false)...)
			if oc, ok := cat.(OptionsChecker); ok && len(ps) == n {
				for _, e := range flatten(oc.CheckOptions(d.Name, d.Options)) {
					if fe := (*FieldError)(nil); errors.As(e, &fe) {
						add(path+"."+fe.Key, "", "%s", fe.Msg)
					} else {
						add(path, "", "%v", e)
					}
				}
			}
			tc, ok := cat.(TopologyChecker)
			if ok && len(ps) == n && !s.isMesh() && slices.Contains(Topologies, s.Topology) {
				if err := tc.CheckTopology(d.Name, d.Options, s.Topology); err != nil {
					add(path, "", "%v", err)
				}
			}
			if wc, ok := cat.(WANChecker); ok && len(ps) == n && !s.IsKube() && (s.WAN.Emulated() || s.WAN.RateBPS > 0) {
				if err := wc.CheckWAN(d.Name, d.Options); err != nil {
					add(path, "", "%v", err)
				}
			}
			if sc, ok := cat.(SiteChecker); ok && len(ps) == n && !s.IsKube() && s.Sites > 2 {
				if err := sc.CheckSites(d.Name, d.Options, s.Sites); err != nil {
					add(path, "", "%v", err)
				}
			}
		}
		if d.Label == "" {
			continue
		}
		if j, dup := labels[d.Label]; dup {
			add(path, "", "duplicate label %q (also datapaths[%d]; set label to tell them apart)", d.Label, j)
		} else {
			labels[d.Label] = i
		}
	}
	ps = append(ps, s.kubeProblems(cat)...)
	dpClean := len(ps) == ndp
	if _, ok := labels[s.Baseline]; !ok && len(labels) > 0 {
		add("baseline", "", "%q is not a datapath label (labels: %s)", s.Baseline, strings.Join(s.DatapathLabels(), ", "))
	}

	if len(s.Workloads) == 0 {
		add("workloads", "", "must list at least one workload")
	}
	clean := true
	for i, w := range s.Workloads {
		path := index("workloads", i)
		n := len(ps)
		if fields, ok := workloadFields(cat, w.Type); !ok {
			if w.Type == "" {
				add(path+".type", path, `missing required key "type"`)
			} else {
				add(path+".type", "", "unknown workload type %q%s", w.Type, knownNames(cat, true, s.IsKube()))
			}
		} else {
			ps = append(ps, checkParams(path, fields, w.Params, true)...)
			if len(ps) == n {
				ps = append(ps, paramsProblems(cat, path, w)...)
			}
		}
		if len(ps) == n && min(matrixSize(w)*s.limitPointCount()*len(s.wanPoints())*len(s.sitePoints()), maxPoints+1) > maxPoints {
			add(path, "", "matrix has more than %d points", maxPoints)
		}
		if len(ps) == n {
			ps = append(ps, s.siteProblems(path, w)...)
			ps = append(ps, s.serversProblems(path, w)...)
		}
		clean = clean && len(ps) == n
	}
	ps = append(ps, s.limitProblems(cat, dpClean)...)
	if clean && dpClean {
		ps = append(ps, s.capabilityProblems(cat)...)
	}
	if clean {
		// Equal points would be equal trials, which records cannot tell apart.
		seen := map[string]int{}
		for i, w := range s.Workloads {
			for _, pt := range w.points() {
				k := w.Type + " " + pt.Params.Key()
				if j, dup := seen[k]; dup && j == i {
					add(index("workloads", i), "", "duplicate point %q: a list repeats a value", pt.Params.Key())
					break
				} else if dup {
					add(index("workloads", i), "", "duplicate point %q (also in workloads[%d])", pt.Params.Key(), j)
					break
				}
				seen[k] = i
			}
		}
	}
	return ps
}

// siteName matches the names of listed sites.
var siteName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$`)

// kubeProblems checks the sites list and the settings of a run on
// Kubernetes sites, and that every datapath and workload runs on the
// scenario's kind of sites (when cat is a BackendLister).
func (s *Scenario) kubeProblems(cat Catalog) []problem {
	var ps []problem
	add := func(subject, format string, args ...any) {
		ps = append(ps, problem{subject: subject, msg: fmt.Sprintf(format, args...)})
	}
	names := map[string]int{}
	for i, st := range s.SiteList {
		path := index("sites", i)
		switch {
		case st.Name == "":
			add(path, `missing required key "name"`)
		case !siteName.MatchString(st.Name):
			add(path+".name", "%q: want 1-16 of a-z, 0-9 and -, starting and ending with a letter or digit", st.Name)
		default:
			if j, dup := names[st.Name]; dup {
				add(path+".name", "duplicate site name %q (also sites[%d])", st.Name, j)
			}
			names[st.Name] = i
		}
		if st.Context == "" && st.Kubeconfig == "" {
			add(path, "a listed site is on a Kubernetes cluster: give its context (and kubeconfig unless the default one has it)")
		}
		for j, t := range st.Tolerations {
			tp := index(path+".tolerations", j)
			if t.Operator != "" && t.Operator != "Equal" && t.Operator != "Exists" {
				add(tp+".operator", "must be Equal or Exists, got %q", t.Operator)
			}
			if t.Effect != "" && !slices.Contains([]string{"NoSchedule", "PreferNoSchedule", "NoExecute"}, t.Effect) {
				add(tp+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute, got %q", t.Effect)
			}
		}
	}
	kube := s.IsKube()
	if kube && len(s.SiteList) < 2 {
		add("sites", "list at least two sites (they may share a context)")
	}
	if !kube {
		for key, set := range map[string]bool{"image": s.Kube.Image != "", "server_image": s.Kube.ServerImage != "", "probe": s.Kube.Probe != "", "prometheus": s.Kube.Prometheus != "",
			"allow_patch": s.Kube.AllowPatch, "share_node": s.Kube.ShareNode} {
			if set {
				add(key, "applies only to Kubernetes sites (a list of sites with context:)")
			}
		}
	} else {
		if s.Kube.Probe != "" && s.Kube.Probe != ProbeNone && s.Kube.Probe != ProbeNode {
			add("probe", "must be %s or %s, got %q", ProbeNone, ProbeNode, s.Kube.Probe)
		}
		if u, err := url.Parse(s.Kube.Prometheus); s.Kube.Prometheus != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			add("prometheus", "want the http:// or https:// URL of a Prometheus server, got %q", s.Kube.Prometheus)
		}
		if s.WAN.RateBPS != 0 || (s.WAN.MTU != 0 && s.WAN.MTU != 1500) || len(s.WAN.MTUSweep) > 0 {
			add("wan", "Kubernetes sites are joined by the clusters' own network, which spanperf does not shape")
		}
		if !s.isMesh() {
			add("topology", "Kubernetes sites run workloads in pods (topology %s only)", Topologies[0])
		}
		if len(s.Limits) > 0 && !s.Kube.AllowPatch {
			add("limits", "on Kubernetes sites a limit patches the CPU limit of a solution's Deployment or DaemonSet in your installation (restored after the run): set allow_patch: true to allow it")
		}
	}
	bl, ok := cat.(BackendLister)
	if !ok {
		return ps
	}
	for i, d := range s.Datapaths {
		if _, known := cat.DatapathFields(d.Name); !known || d.Name == "" {
			continue
		}
		switch k := bl.DatapathKube(d.Name); {
		case k && !kube:
			add(index("datapaths", i), "%s exposes a server on Kubernetes sites: list the sites with their contexts (sites: [{name: east, context: east}, ...])", d.Name)
		case !k && kube:
			add(index("datapaths", i), "%s runs on local sites (network namespaces), not on Kubernetes sites: use k8s-pod, k8s-hostnet, k8s-clusterip, k8s-nodeport, k8s-loadbalancer or a solution's adapter", d.Name)
		}
	}
	if kube {
		for i, w := range s.Workloads {
			if _, known := cat.WorkloadFields(w.Type); known && !bl.WorkloadPods(w.Type) {
				add(index("workloads", i)+".type", "%s runs programs on the controller's machine and only on local sites; in pods: the agent's workloads (stream, rr, crr, http, rate-sweep) and, with server_image:, pgbench", w.Type)
			} else if slices.Contains(w.Params["server"], any("nginx")) && s.Kube.ServerImage == "" {
				add(index("workloads", i)+".server", "nginx on Kubernetes sites runs from the image server_image: names (an image with nginx in its PATH; --server-image overrides): set it, or use server: builtin")
			} else if w.Type == "pgbench" && s.Kube.ServerImage == "" {
				add(index("workloads", i)+".type", "pgbench on Kubernetes sites runs PostgreSQL and pgbench from the image server_image: names (initdb, postgres and pgbench in its PATH, a user postgres): set it")
			}
		}
	}
	return ps
}

// limitKey matches the keys of limits: component names ("wireguard-go@a")
// and roles ("relay").
var limitKey = regexp.MustCompile(`^[A-Za-z0-9_.:@-]+$`)

// limitProblems checks s.Limits; with targets set and a catalog that is a
// ComponentLister, also that each key names a process of some datapath
// (targets is false while a datapath entry has problems of its own).
func (s *Scenario) limitProblems(cat Catalog, targets bool) []problem {
	var ps []problem
	cl, lists := cat.(ComponentLister)
	for _, key := range slices.Sorted(maps.Keys(s.Limits)) {
		kp := join("limits", key)
		if !limitKey.MatchString(key) {
			ps = append(ps, problem{subject: kp, msg: fmt.Sprintf("%q is not a component name or role (letters, digits and . _ - @ :)", key)})
			continue
		}
		if targets && lists {
			switch labels, kernel := s.limitTargets(cl, key); {
			case len(labels) == 0 && kernel:
				ps = append(ps, problem{subject: kp, msg: "names only kernel work, which has no process to limit"})
			case len(labels) == 0:
				ps = append(ps, problem{subject: kp, msg: fmt.Sprintf("names no component or role of the datapaths (%s)", s.describeComponents(cl))})
			}
		}
		for j, wl := range s.Limits[key].Workloads {
			wk := join(kp, "workloads")
			ek := elemKey(wk, j, len(s.Limits[key].Workloads))
			if !slices.ContainsFunc(s.Workloads, func(w WorkloadSpec) bool { return w.Type == wl }) {
				var types []string
				for _, w := range s.Workloads {
					types = append(types, w.Type)
				}
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q is not a workload of the scenario (%s)", wl, strings.Join(types, ", "))})
			}
		}
		cpu := s.Limits[key].CPU
		cp := join(kp, "cpu")
		if len(cpu) == 0 {
			ps = append(ps, problem{subject: cp, at: kp, msg: `missing required key "cpu"`})
		}
		for j, c := range cpu {
			ek := elemKey(cp, j, len(cpu))
			switch {
			case !(c > 0) || math.IsInf(c, 0):
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("must be > 0, got %v", c)})
			case slices.Index(cpu, c) < j:
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("duplicate value %v", c)})
			}
		}
	}
	return ps
}

// limitTargets returns the labels of the datapaths, in scenario order, with
// a process whose name or role is key, and whether key names kernel work
// of some datapath.
func (s *Scenario) limitTargets(cl ComponentLister, key string) (labels []string, kernel bool) {
	labels = []string{}
	for _, d := range s.Datapaths {
		has := false
		for _, c := range cl.Components(d.Name, d.Options, s.Sites) {
			if c.Name != key && c.Role != key && !(c.Name == "" && c.Process && strings.Contains(key, "@")) {
				continue
			}
			has = has || c.Process
			kernel = kernel || !c.Process
		}
		if has {
			labels = append(labels, d.Label)
		}
	}
	return labels, kernel
}

// describeComponents lists the components of every datapath, for messages:
// "native: kernel (kernel); mtls-relay: haproxy@a (relay), ...".
func (s *Scenario) describeComponents(cl ComponentLister) string {
	var parts []string
	for _, d := range s.Datapaths {
		var cs []string
		for _, c := range cl.Components(d.Name, d.Options, s.Sites) {
			name := c.Name
			if name == "" {
				name = "NAME@SITE"
			}
			cs = append(cs, name+" ("+c.Role+")")
		}
		if len(cs) == 0 {
			cs = []string{"none"}
		}
		parts = append(parts, d.Label+": "+strings.Join(cs, ", "))
	}
	return strings.Join(parts, "; ")
}

// Parameters every workload takes: the sites its client and its server run
// in (defaults: the first site and the last). A list expands the matrix.
// (Not "client" and "server": http's server is the kind of server.)
const (
	ClientParam = "client_site"
	ServerParam = "server_site"
)

// SiteFields are the fields of ClientParam and ServerParam.
var SiteFields = []Field{
	{Name: ClientParam, Kind: KindString, List: true, Doc: `the site the client runs in (default: the first); "a+b+c": a client in each at once against the one server (fan-in: stream, rr, crr)`},
	{Name: ServerParam, Kind: KindString, List: true, Doc: "the site the server runs in (default: the last)"},
}

// workloadFields are workload typ's fields in cat, and SiteFields.
func workloadFields(cat Catalog, typ string) ([]Field, bool) {
	fields, ok := cat.WorkloadFields(typ)
	if !ok {
		return nil, false
	}
	return append(slices.Clip(fields), SiteFields...), true
}

// SiteNames are the names of s's sites, in order.
func (s *Scenario) SiteNames() []string {
	if s.IsKube() {
		var out []string
		for _, st := range s.SiteList {
			out = append(out, st.Name)
		}
		return out
	}
	n := s.Sites
	if len(s.SiteCounts) > 0 {
		n = slices.Min(s.SiteCounts) // a name must be a site at every count
	}
	var out []string
	for i := range n {
		out = append(out, testbed.SiteName(i))
	}
	return out
}

// siteProblems checks workload w's client and server sites (at key path
// path): each a site of s, and never the same site at one point.
func (s *Scenario) siteProblems(path string, w WorkloadSpec) []problem {
	var ps []problem
	names := s.SiteNames()
	if len(names) < 2 {
		return nil // sites reports it
	}
	for _, k := range []string{ClientParam, ServerParam} {
		for j, v := range w.Params[k] {
			ek := elemKey(join(path, k), j, len(w.Params[k]))
			v, _ := v.(string)
			parts := strings.Split(v, "+")
			if k == ServerParam && len(parts) > 1 {
				ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q: a trial has one server (several clients: client_site: \"a+b\")", v)})
				continue
			}
			for i, n := range parts {
				switch {
				case !slices.Contains(names, n):
					ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q is not a site (sites: %s)", n, strings.Join(names, ", "))})
				case slices.Index(parts, n) < i:
					ps = append(ps, problem{subject: ek, msg: fmt.Sprintf("%q names site %s twice", v, n)})
				}
			}
		}
	}
	if len(ps) > 0 {
		return ps
	}
	first, last := names[0], names[len(names)-1]
	for _, pt := range w.points() {
		c, sv := first, last
		if v, ok := pt.Params[ClientParam].(string); ok {
			c = v
		}
		if v, ok := pt.Params[ServerParam].(string); ok {
			sv = v
		}
		if slices.Contains(strings.Split(c, "+"), sv) {
			ps = append(ps, problem{subject: path, msg: fmt.Sprintf("point %q puts a client and the server in site %s: they must be two sites", pt.Params.Key(), sv)})
		}
	}
	return ps
}

// wanProblems checks the wan keys that need an emulator.
func (s *Scenario) wanProblems() []problem {
	var ps []problem
	add := func(subject, format string, args ...any) {
		ps = append(ps, problem{subject: subject, msg: fmt.Sprintf(format, args...)})
	}
	w := s.WAN
	if e := w.Emulator; e != "" && e != WANEmulatorAuto && e != WANEmulatorNetem && e != WANEmulatorUserspace {
		add("wan.emulator", "must be %s, %s or %s, got %q", WANEmulatorAuto, WANEmulatorNetem, WANEmulatorUserspace, e)
	}
	if s.IsKube() {
		if w.Emulated() {
			add("wan", "Kubernetes sites are joined by the clusters' own network, which spanperf does not shape")
		}
		return ps
	}
	names := s.SiteNames()
	seen := map[[2]string]int{}
	for i, l := range w.Links {
		kp := index("wan.links", i)
		for j, n := range l.Between {
			if !slices.Contains(names, n) {
				add(elemKey(kp+".between", j, 2), "%q is not a site (sites: %s)", n, strings.Join(names, ", "))
			}
		}
		if l.Between[0] == l.Between[1] {
			add(kp+".between", "names %s twice: a link joins two sites", l.Between[0])
		}
		key := l.Between
		if key[0] > key[1] {
			key[0], key[1] = key[1], key[0]
		}
		if first, dup := seen[key]; dup {
			add(kp+".between", "%s and %s are already linked by wan.links[%d]", key[0], key[1], first)
		}
		seen[key] = i
	}
	return ps
}

// SitesParam is the parameter of a point's number of sites when the
// scenario sweeps it (sites: [2, 4, 8]).
const SitesParam = "sites"

// sitePoints are the sweep of the number of sites as parameter sets; one
// empty set without a sweep.
func (s *Scenario) sitePoints() []results.Params {
	if len(s.SiteCounts) == 0 {
		return []results.Params{{}}
	}
	return paramList(SitesParam, s.SiteCounts, func(n int) any { return int64(n) })
}

// wanPoints expands the wan's sweeps (delay, jitter, loss, then each
// link's) into the cross
// product of their lists, as parameters results.WANDelayParam, ...; without
// them it is one empty set.
func (s *Scenario) wanPoints() []results.Params {
	pts := []results.Params{{}}
	if len(s.WAN.Delay) > 0 {
		pts = cross(pts, paramList(results.WANDelayParam, s.WAN.Delay, func(d time.Duration) any { return d.String() }))
	}
	if len(s.WAN.Jitter) > 0 {
		pts = cross(pts, paramList(results.WANJitterParam, s.WAN.Jitter, func(d time.Duration) any { return d.String() }))
	}
	if len(s.WAN.LossPercent) > 0 {
		pts = cross(pts, paramList(results.WANLossParam, s.WAN.LossPercent, func(x float64) any { return x }))
	}
	return s.linkSweepPoints(pts)
}

// paramList is one parameter's values as parameter sets.
func paramList[T any](name string, vs []T, conv func(T) any) []results.Params {
	out := make([]results.Params, len(vs))
	for i, v := range vs {
		out[i] = results.Params{name: conv(v)}
	}
	return out
}

// cross is every union of a set of a with a set of b, a's varying slowest.
func cross(a, b []results.Params) []results.Params {
	out := make([]results.Params, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			q := maps.Clone(x)
			maps.Copy(q, y)
			out = append(out, q)
		}
	}
	return out
}

// limitPointCount is how many points the limits add to each workload
// point (the product of their list lengths), saturating at maxPoints+1.
func (s *Scenario) limitPointCount() int {
	n := 1
	for _, l := range s.Limits {
		n = min(n*max(len(l.CPU), 1), maxPoints+1)
	}
	return n
}

// limitPoints expands the limits of s that apply to datapath label (every
// limit when label is "") and to workload type workload (Limit.Workloads) into the cross product of their lists, each a
// set of parameters named by results.CPULimitParam; the alphabetically first
// key varies slowest. Without limits it is one empty set.
func (s *Scenario) limitPoints(label, workload string) []results.Params {
	pts := []results.Params{{}}
	for _, key := range slices.Sorted(maps.Keys(s.Limits)) {
		l := s.Limits[key]
		cpu := l.CPU
		if len(cpu) == 0 || label != "" && l.Datapaths != nil && !slices.Contains(l.Datapaths, label) ||
			len(l.Workloads) > 0 && !slices.Contains(l.Workloads, workload) {
			continue
		}
		next := make([]results.Params, 0, len(pts)*len(cpu))
		for _, pt := range pts {
			for _, c := range cpu {
				q := maps.Clone(pt)
				q[results.CPULimitParam(key)] = c
				next = append(next, q)
			}
		}
		pts = next
	}
	return pts
}

// checkParams checks the values of the fields of one datapath (lists false:
// one value each) or workload at key path path.
func checkParams(path string, fields []Field, vals map[string][]any, lists bool) []problem {
	var ps []problem
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		kp := join(path, k)
		f, ok := field(fields, k)
		if !ok {
			ps = append(ps, problem{subject: kp, msg: fmt.Sprintf("unknown key %q%s", k, suggest(k, fieldNames(fields)))})
			continue
		}
		vs := vals[k]
		switch {
		case len(vs) == 0:
			ps = append(ps, problem{subject: kp, msg: "empty list"})
		case len(vs) > 1 && !(lists && f.List):
			ps = append(ps, problem{subject: kp, msg: fmt.Sprintf("want %s, got a list", f.Kind)})
			continue
		}
		for j, v := range vs {
			if f.Kind == KindRecords {
				ps = append(ps, checkRecords(elemKey(kp, j, len(vs)), f, v)...)
				continue
			}
			if msg := checkValue(f, v); msg != "" {
				ps = append(ps, problem{subject: elemKey(kp, j, len(vs)), msg: msg})
			}
		}
	}
	for _, f := range fields {
		if _, ok := vals[f.Name]; f.Required && !ok {
			ps = append(ps, problem{subject: join(path, f.Name), at: path, msg: fmt.Sprintf("missing required key %q", f.Name)})
		}
	}
	return ps
}

// checkRecords checks the stored value v of a KindRecords field f at key
// path path: a list of mappings with f.Record's keys.
func checkRecords(path string, f Field, v any) []problem {
	recs, ok := v.([]map[string]any)
	if !ok {
		return []problem{{subject: path, msg: wantGo(f.Kind, v)}}
	}
	var ps []problem
	for i, r := range recs {
		vals := make(map[string][]any, len(r))
		for k, x := range r {
			vals[k] = []any{x}
		}
		ps = append(ps, checkParams(index(path, i), f.Record, vals, false)...)
	}
	return ps
}

// flatten lists the errors err joins (err itself if it joins none; none
// for nil).
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// matrixSize is the number of points of w, saturating at maxPoints+1.
func matrixSize(w WorkloadSpec) int {
	n := 1
	for _, vs := range w.Params {
		n = min(n*len(vs), maxPoints+1)
	}
	return n
}

// Apply replaces the settings of s with the overrides o, then normalizes and
// validates the result; on error s is left unchanged.
func (s *Scenario) Apply(o Overrides, cat Catalog) error {
	t := *s
	t.Datapaths = slices.Clone(s.Datapaths)
	t.Workloads = slices.Clone(s.Workloads)
	if o.Duration != 0 {
		t.Duration = o.Duration
	}
	if o.Reps != 0 {
		t.Repetitions = o.Reps
	}
	if o.Image != "" {
		t.Kube.Image = o.Image
	}
	if o.ServerImage != "" {
		t.Kube.ServerImage = o.ServerImage
	}
	if len(o.Datapaths) > 0 {
		t.Datapaths = nil
		for _, label := range dedupe(o.Datapaths) {
			if i := slices.IndexFunc(s.Datapaths, func(d DatapathSpec) bool { return d.Label == label }); i >= 0 {
				t.Datapaths = append(t.Datapaths, s.Datapaths[i])
				continue
			}
			if _, ok := cat.DatapathFields(label); !ok {
				return fmt.Errorf("%s: datapaths: unknown datapath %q%s", s.what(), label, knownNames(cat, false, s.IsKube()))
			}
			t.Datapaths = append(t.Datapaths, DatapathSpec{Name: label, Label: label})
		}
		if !slices.Contains(t.DatapathLabels(), t.Baseline) {
			t.Baseline = ""
		}
	}
	if len(o.Workloads) > 0 {
		t.Workloads = nil
		for _, typ := range dedupe(o.Workloads) {
			n := len(t.Workloads)
			for _, w := range s.Workloads {
				if w.Type == typ {
					t.Workloads = append(t.Workloads, w)
				}
			}
			if len(t.Workloads) > n {
				continue
			}
			if _, ok := cat.WorkloadFields(typ); !ok {
				return fmt.Errorf("%s: workloads: unknown workload type %q%s", s.what(), typ, knownNames(cat, true, s.IsKube()))
			}
			t.Workloads = append(t.Workloads, WorkloadSpec{Type: typ})
		}
	}
	t.Normalize(cat)
	if err := t.Validate(cat); err != nil {
		return err
	}
	*s = t
	return nil
}

// Points expands every workload entry, in file order, into the cross
// product of its parameter lists. Within an entry the alphabetically first
// parameter varies slowest and each list is taken in file order. Durations
// become their String form. When the scenario has limits, each point is
// crossed with every combination of them, which vary fastest: the
// parameter results.CPULimitParam(key) holds the CPU limit of key, in cores.
func (s *Scenario) Points() []Point {
	return s.points("")
}

// PointsOf returns the points the datapath labelled label runs: those of
// Points, crossed only with the limits that apply to it (Limit.Datapaths).
// A datapath that no limit applies to runs each workload point once.
func (s *Scenario) PointsOf(label string) []Point {
	return s.points(label)
}

func (s *Scenario) points(label string) []Point {
	var pts []Point
	for _, w := range s.Workloads {
		lims := cross(cross(s.sitePoints(), s.limitPoints(label, w.Type)), s.wanPoints())
		for _, pt := range w.points() {
			for _, lp := range lims {
				p := maps.Clone(pt.Params)
				maps.Copy(p, lp)
				pts = append(pts, Point{Workload: pt.Workload, Params: p})
			}
		}
	}
	return pts
}

func (w WorkloadSpec) points() []Point {
	keys := slices.Sorted(maps.Keys(w.Params))
	for _, k := range keys {
		if len(w.Params[k]) == 0 {
			return nil
		}
	}
	var pts []Point
	idx := make([]int, len(keys))
	for {
		p := make(results.Params, len(keys))
		for i, k := range keys {
			v := w.Params[k][idx[i]]
			if d, ok := v.(time.Duration); ok {
				v = d.String()
			}
			p[k] = v
		}
		pts = append(pts, Point{Workload: w.Type, Params: p})
		i := len(keys) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < len(w.Params[keys[i]]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return pts
		}
	}
}

// DatapathLabels returns the label of every datapath, in order; an entry
// without a label gives its name.
func (s *Scenario) DatapathLabels() []string {
	labels := make([]string, len(s.Datapaths))
	for i, d := range s.Datapaths {
		labels[i] = d.Label
		if labels[i] == "" {
			labels[i] = d.Name
		}
	}
	return labels
}

// knownNames returns " (known: a, b)" listing the datapaths, or the
// workloads, of cat, when cat can list them.
//
// With a BackendLister, datapaths are those for the scenario's kind of
// sites (local or Kubernetes, as kube says); workloads are all listed.
func knownNames(cat Catalog, workloads, kube bool) string {
	l, ok := cat.(NameLister)
	if !ok {
		return ""
	}
	names := l.DatapathNames()
	if workloads {
		names = l.WorkloadNames()
	} else if bl, ok := cat.(BackendLister); ok {
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return bl.DatapathKube(n) != kube })
	}
	return " (known: " + strings.Join(slices.Sorted(slices.Values(names)), ", ") + ")"
}

func field(fields []Field, name string) (Field, bool) {
	i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == name })
	if i < 0 {
		return Field{}, false
	}
	return fields[i], true
}

func fieldNames(fields []Field) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// join appends key to the key path path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index appends "[i]" to the key path path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// elemKey is the key path of element j of the n-element list at path: path
// itself when the list has one element, as a scalar in the file does.
func elemKey(path string, j, n int) string {
	if n == 1 {
		return path
	}
	return index(path, j)
}
