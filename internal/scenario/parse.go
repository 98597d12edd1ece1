package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// metricName is the form of a metric's name: latency_p90_s,
// cpu_cores{relay@b}.
var metricName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\{[^{}\s]+\})?$`)

// topKeys are the keys a scenario file accepts at the top level.
func topKeys() []string {
	return []string{"name", "sites", "wan", "topology", "baseline", "datapaths", "workloads",
		"repetitions", "duration", "warmup", "seed", "limits", "energy", "probe_interval",
		"image", "server_image", "probe", "prometheus", "allow_patch", "share_node", "sizing_cells", "summary_metrics"}
}

// Load reads the scenario file at path and parses it with Parse.
func Load(path string, cat Catalog) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	return Parse(path, data, cat)
}

// Parse decodes the scenario in data, read from file, against the datapaths
// and workloads of cat. It reports every problem in the file, one per line
// as "FILE:LINE: KEY: message", in line order, joined with errors.Join. The
// scenario it returns is normalized and valid. A key that is absent or null
// takes its default; a file without a warmup key gets 1s.
func Parse(file string, data []byte, cat Catalog) (*Scenario, error) {
	p := &parser{file: file, cat: cat, lines: map[string]int{}, bad: map[string]bool{}}
	s := p.scenario(data)
	if s != nil {
		s.Normalize(cat)
		for _, pr := range s.problems(cat) {
			if !p.suppressed(pr.subject) {
				p.add(p.lineOf(pr.subject), pr.key(), pr.msg)
			}
		}
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b lineError) int { return a.line - b.line })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = errors.New(e.text)
		}
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// parser walks a scenario's YAML node tree.
type parser struct {
	file string
	cat  Catalog
	errs []lineError
	// lines maps each key path seen to its line, to place the problems
	// found later on the decoded Scenario.
	lines map[string]int
	// bad holds the key paths already reported, whose values were left out
	// or stored as nil: later problems at or below them are not repeated.
	bad map[string]bool
}

type lineError struct {
	line int
	text string
}

func (p *parser) add(line int, key, msg string) {
	text := fmt.Sprintf("%s:%d: %s: %s", p.file, line, key, msg)
	if key == "" {
		text = fmt.Sprintf("%s:%d: %s", p.file, line, msg)
	}
	p.errs = append(p.errs, lineError{line, text})
}

// errorf reports a problem at node n and key path key.
func (p *parser) errorf(n *yaml.Node, key, format string, args ...any) {
	p.bad[key] = true
	p.add(n.Line, key, fmt.Sprintf(format, args...))
}

// lineOf returns the line of key path key, or of its closest ancestor.
func (p *parser) lineOf(key string) int {
	for {
		if l, ok := p.lines[key]; ok {
			return l
		}
		if key == "" {
			return 1
		}
		key = parent(key)
	}
}

// suppressed tells whether key or one of its ancestors was reported already.
func (p *parser) suppressed(key string) bool {
	for {
		if p.bad[key] {
			return true
		}
		if key == "" {
			return false
		}
		key = parent(key)
	}
}

// parent strips the last ".name" or "[i]" from a key path.
func parent(key string) string {
	return key[:max(strings.LastIndexAny(key, ".["), 0)]
}

// syntax reports a YAML syntax error, which yaml.v3 words
// "yaml: line N: message" or, on the first line, "yaml: message".
func (p *parser) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(num); err == nil {
				line, msg = l, after
			}
		}
	}
	p.add(line, "", msg)
}

// scenario decodes data; it returns nil when the YAML could not be read.
func (p *parser) scenario(data []byte) *Scenario {
	var doc, extra yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err == io.EOF {
		p.add(1, "", "empty scenario file")
		return nil
	} else if err != nil {
		p.syntax(err)
		return nil
	}
	if err := dec.Decode(&extra); err == nil {
		p.add(extra.Line, "", "more than one YAML document")
	} else if err != io.EOF {
		p.syntax(err)
		return nil
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	p.lines[""] = root.Line

	s := &Scenario{File: p.file, Warmup: time.Second}
	p.mapping(root, "", topKeys(), func(key, kp string, v *yaml.Node) {
		switch key {
		case "name":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Name = x.(string)
			}
		case "sites":
			if d := deref(v); d.Kind == yaml.SequenceNode && len(d.Content) > 0 && deref(d.Content[0]).Kind == yaml.ScalarNode {
				for j, e := range d.Content {
					ek := elemKey(kp, j, len(d.Content))
					p.lines[ek] = e.Line
					if x, ok := p.top(KindInt, e, ek); ok {
						n := int(x.(int64))
						switch {
						case n < 2 || n > 200:
							p.errorf(e, ek, "want 2 to 200 sites, got %d", n)
						case slices.Contains(s.SiteCounts, n):
							p.errorf(e, ek, "duplicate value %d", n)
						default:
							s.SiteCounts = append(s.SiteCounts, n)
							s.Sites = max(s.Sites, n)
						}
					}
				}
			} else if deref(v).Kind == yaml.SequenceNode {
				s.SiteList = p.sites(v, kp)
				s.Sites = len(s.SiteList)
			} else if x, ok := p.top(KindInt, v, kp); ok {
				s.Sites = int(x.(int64))
			}
		case "image":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Kube.Image = x.(string)
			}
		case "server_image":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Kube.ServerImage = x.(string)
			}
		case "probe":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Kube.Probe = x.(string)
			}
		case "prometheus":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Kube.Prometheus = x.(string)
			}
		case "allow_patch":
			if x, ok := p.value(KindBool, v, kp); ok {
				s.Kube.AllowPatch = x.(bool)
			}
		case "share_node":
			if x, ok := p.value(KindBool, v, kp); ok {
				s.Kube.ShareNode = x.(bool)
			}
		case "wan":
			p.wan(v, kp, &s.WAN)
		case "topology":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Topology = x.(string)
			}
		case "baseline":
			if x, ok := p.value(KindString, v, kp); ok {
				s.Baseline = x.(string)
			}
		case "datapaths":
			for i, it := range p.seq(v, kp) {
				ip := index(kp, i)
				p.lines[ip] = it.Line
				s.Datapaths = append(s.Datapaths, p.datapath(it, ip))
			}
		case "workloads":
			for i, it := range p.seq(v, kp) {
				ip := index(kp, i)
				p.lines[ip] = it.Line
				s.Workloads = append(s.Workloads, p.workload(it, ip))
			}
		case "repetitions":
			if x, ok := p.top(KindInt, v, kp); ok {
				s.Repetitions = int(x.(int64))
			}
		case "duration":
			if x, ok := p.top(KindDuration, v, kp); ok {
				s.Duration = x.(time.Duration)
			}
		case "warmup":
			if x, ok := p.top(KindDuration, v, kp); ok {
				s.Warmup = x.(time.Duration)
			}
		case "probe_interval":
			if x, ok := p.top(KindDuration, v, kp); ok {
				s.ProbeInterval = x.(time.Duration)
			}
		case "seed":
			if x, ok := p.value(KindInt, v, kp); ok {
				s.Seed = x.(int64)
			}
		case "limits":
			s.Limits = p.limits(v, kp)
		case "sizing_cells":
			if x, ok := p.value(KindString, v, kp); ok {
				if c := x.(string); slices.Contains(SizingCellsValues, c) {
					s.SizingCells = c
				} else {
					p.errorf(v, kp, "%q: want one of %s", c, strings.Join(SizingCellsValues, ", "))
				}
			}
		case "summary_metrics":
			items := p.list(v, kp)
			for j, e := range items {
				ek := elemKey(kp, j, len(items))
				p.lines[ek] = e.Line
				if x, ok := p.value(KindString, e, ek); ok {
					switch m := x.(string); {
					case !metricName.MatchString(m):
						p.errorf(e, ek, "%q is not a metric name (lowercase words joined by _, as latency_p90_s, optionally {COMPONENT})", m)
					case slices.Contains(s.SummaryMetrics, m):
						p.errorf(e, ek, "duplicate metric %q", m)
					default:
						s.SummaryMetrics = append(s.SummaryMetrics, m)
					}
				}
			}
		case "energy":
			p.mapping(v, kp, []string{"idle_watts", "watts_per_core"}, func(key, kp string, v *yaml.Node) {
				x, ok := p.top(KindFloat, v, kp)
				switch {
				case !ok:
				case key == "idle_watts":
					s.Energy.IdleWatts = x.(float64)
				default:
					s.Energy.WattsPerCore = x.(float64)
				}
			})
		}
	})
	return s
}

// sites decodes a list of Kubernetes sites.
func (p *parser) sites(n *yaml.Node, path string) []Site {
	var out []Site
	for i, it := range p.seq(n, path) {
		ip := index(path, i)
		p.lines[ip] = it.Line
		var st Site
		p.mapping(it, ip, []string{"name", "context", "kubeconfig", "node_selector", "tolerations"}, func(key, kp string, v *yaml.Node) {
			switch key {
			case "name", "context", "kubeconfig":
				x, ok := p.value(KindString, v, kp)
				if !ok {
					return
				}
				switch key {
				case "name":
					st.Name = x.(string)
				case "context":
					st.Context = x.(string)
				default:
					st.Kubeconfig = x.(string)
				}
			case "node_selector":
				st.NodeSelector = map[string]string{}
				p.mapping(v, kp, nil, func(key, kp string, v *yaml.Node) {
					if x, ok := p.value(KindString, v, kp); ok {
						st.NodeSelector[key] = x.(string)
					}
				})
			case "tolerations":
				for j, tn := range p.seq(v, kp) {
					tp := index(kp, j)
					p.lines[tp] = tn.Line
					var t Toleration
					p.mapping(tn, tp, []string{"key", "operator", "value", "effect"}, func(key, kp string, v *yaml.Node) {
						x, ok := p.value(KindString, v, kp)
						if !ok {
							return
						}
						switch key {
						case "key":
							t.Key = x.(string)
						case "operator":
							t.Operator = x.(string)
						case "value":
							t.Value = x.(string)
						default:
							t.Effect = x.(string)
						}
					})
					st.Tolerations = append(st.Tolerations, t)
				}
			}
		})
		out = append(out, st)
	}
	return out
}

// limits decodes the limits mapping n: component name or role to a
// mapping of resource limits.
func (p *parser) limits(n *yaml.Node, path string) map[string]Limit {
	out := map[string]Limit{}
	p.mapping(n, path, nil, func(key, kp string, v *yaml.Node) {
		var lim Limit
		p.mapping(v, kp, []string{"cpu", "workloads"}, func(key, kp string, v *yaml.Node) {
			if key == "workloads" {
				lim.Workloads = p.limitWorkloads(v, kp)
				return
			}
			lim.CPU = p.floats(v, kp)
		})
		out[key] = lim
	})
	return out
}

// limitWorkloads decodes a limit's workloads: a workload type or a list
// of them.
func (p *parser) limitWorkloads(n *yaml.Node, path string) []string {
	var out []string
	items := p.list(n, path)
	for j, e := range items {
		ek := elemKey(path, j, len(items))
		p.lines[ek] = e.Line
		if x, ok := p.value(KindString, e, ek); ok {
			out = append(out, x.(string))
		}
	}
	return out
}

// wan decodes the wan mapping at key path path into w.
func (p *parser) wan(n *yaml.Node, path string, w *WAN) {
	p.mapping(n, path, []string{"mtu", "rate", "delay", "jitter", "loss", "links", "emulator"}, func(key, kp string, v *yaml.Node) {
		switch key {
		case "mtu":
			if p.mtuSweep(kp, v, w) {
				return
			}
			if x, ok := p.top(KindInt, v, kp); ok {
				w.MTU = int(x.(int64))
			}
		case "rate":
			if x, ok := p.top(KindRate, v, kp); ok {
				w.RateBPS = x.(int64)
			}
		case "delay":
			w.Delay = p.durations(v, kp)
		case "jitter":
			w.Jitter = p.durations(v, kp)
		case "loss":
			items := p.list(v, kp)
			for j, e := range items {
				if x, ok := p.percent(e, elemKey(kp, j, len(items))); ok {
					w.LossPercent = append(w.LossPercent, x)
				}
			}
		case "emulator":
			if x, ok := p.value(KindString, v, kp); ok {
				w.Emulator = x.(string)
			}
		case "links":
			for i, e := range p.seq(v, kp) {
				ip := index(kp, i)
				var l WANLink
				p.mapping(e, ip, []string{"between", "delay", "jitter", "loss", "rate"}, func(key, kp string, v *yaml.Node) {
					if p.linkSweep(key, kp, v, &l) {
						return
					}
					switch key {
					case "between":
						items := p.seq(v, kp)
						if len(items) != 2 {
							p.errorf(v, kp, "want two site names, got %d", len(items))
							return
						}
						for j, it := range items {
							if x, ok := p.value(KindString, it, elemKey(kp, j, 2)); ok {
								l.Between[j] = x.(string)
							}
						}
					case "delay", "jitter":
						if x, ok := p.value(KindDuration, v, kp); ok {
							if x.(time.Duration) < 0 {
								p.errorf(v, kp, "must be ≥ 0s, got %v", x)
							} else if key == "delay" {
								l.Delay = x.(time.Duration)
							} else {
								l.Jitter = x.(time.Duration)
							}
						}
					case "loss":
						if x, ok := p.percent(v, kp); ok {
							l.LossPercent = x
						}
					case "rate":
						if x, ok := p.top(KindRate, v, kp); ok {
							l.RateBPS = x.(int64)
						}
					}
				})
				w.Links = append(w.Links, l)
			}
		}
	})
}

// list returns the items of a list at n, or n itself when it is a scalar.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if d := deref(n); d.Kind == yaml.SequenceNode {
		if len(d.Content) == 0 {
			p.errorf(n, path, "empty list")
		}
		return d.Content
	}
	return []*yaml.Node{n}
}

// durations decodes a duration ≥ 0 or a list of them at key path path.
func (p *parser) durations(n *yaml.Node, path string) []time.Duration {
	items := p.list(n, path)
	var out []time.Duration
	for j, e := range items {
		ek := elemKey(path, j, len(items))
		p.lines[ek] = e.Line
		if x, ok := p.value(KindDuration, e, ek); ok {
			if d := x.(time.Duration); d < 0 {
				p.errorf(e, ek, "must be ≥ 0s, got %v", d)
			} else if slices.Contains(out, d) {
				p.errorf(e, ek, "duplicate value %v", d)
			} else {
				out = append(out, d)
			}
		}
	}
	return out
}

// percent decodes a percentage, 0 ≤ x < 100: a number or "N%".
func (p *parser) percent(n *yaml.Node, path string) (float64, bool) {
	d := deref(n)
	p.lines[path] = n.Line
	v := strings.TrimSuffix(strings.TrimSpace(d.Value), "%")
	x, err := strconv.ParseFloat(v, 64)
	if d.Kind != yaml.ScalarNode || err != nil {
		p.errorf(n, path, "want a percentage (1%% or 1), got %s", describe(d))
		return 0, false
	}
	if !(x >= 0 && x < 100) {
		p.errorf(n, path, "want 0%% ≤ loss < 100%%, got %v%%", x)
		return 0, false
	}
	return x, true
}

// floats decodes a number or a list of numbers at key path path; a value
// that is not a number is reported and kept as NaN.
func (p *parser) floats(n *yaml.Node, path string) []float64 {
	d := deref(n)
	items := []*yaml.Node{n}
	if d.Kind == yaml.SequenceNode {
		if items = d.Content; len(items) == 0 {
			p.errorf(n, path, "empty list")
			return nil
		}
	}
	out := make([]float64, len(items))
	for j, e := range items {
		ek := elemKey(path, j, len(items))
		p.lines[ek] = e.Line
		out[j] = math.NaN()
		if x, ok := p.value(KindFloat, e, ek); ok {
			out[j] = x.(float64)
		}
	}
	return out
}

// datapath decodes entry n of the datapaths list: a name or a mapping.
func (p *parser) datapath(n *yaml.Node, path string) DatapathSpec {
	var d DatapathSpec
	if deref(n).Kind == yaml.ScalarNode {
		if x, ok := p.value(KindString, n, path); ok {
			d.Name = x.(string)
		}
		return d
	}
	var fields []Field
	var known []string
	if v := lookup(n, "name"); v != nil {
		if x, ok := p.value(KindString, v, path+".name"); ok {
			d.Name = x.(string)
		}
		var ok bool
		if fields, ok = p.cat.DatapathFields(d.Name); ok {
			known = append([]string{"name", "label"}, fieldNames(fields)...)
		}
	}
	p.mapping(n, path, known, func(key, kp string, v *yaml.Node) {
		switch key {
		case "name":
		case "label":
			if x, ok := p.value(KindString, v, kp); ok {
				d.Label = x.(string)
			}
		default:
			if f, ok := field(fields, key); ok {
				if d.Options == nil {
					d.Options = map[string]any{}
				}
				if f.Kind == KindRecords {
					d.Options[key] = p.records(v, kp, f.Record)
				} else {
					d.Options[key], _ = p.value(f.Kind, v, kp)
				}
			}
		}
	})
	return d
}

// records decodes a list of mappings whose keys fields describe (a
// KindRecords option); a bad element is reported and left out.
func (p *parser) records(n *yaml.Node, path string, fields []Field) []map[string]any {
	items := p.seq(n, path)
	out := []map[string]any{}
	for j, e := range items {
		ek := index(path, j)
		p.lines[ek] = e.Line
		rec := map[string]any{}
		p.mapping(e, ek, fieldNames(fields), func(key, kp string, v *yaml.Node) {
			f, _ := field(fields, key)
			if x, ok := p.value(f.Kind, v, kp); ok {
				rec[key] = x
			}
		})
		out = append(out, rec)
	}
	return out
}

// workload decodes entry n of the workloads list.
func (p *parser) workload(n *yaml.Node, path string) WorkloadSpec {
	w := WorkloadSpec{Params: map[string][]any{}}
	var fields []Field
	var known []string
	if v := lookup(n, "type"); v != nil {
		if x, ok := p.value(KindString, v, path+".type"); ok {
			w.Type = x.(string)
		}
		var ok bool
		if fields, ok = workloadFields(p.cat, w.Type); ok {
			known = append([]string{"type"}, fieldNames(fields)...)
		}
	}
	p.mapping(n, path, known, func(key, kp string, v *yaml.Node) {
		f, ok := field(fields, key)
		if !ok {
			return
		}
		d := deref(v)
		if !f.List || d.Kind != yaml.SequenceNode {
			x, _ := p.value(f.Kind, v, kp)
			w.Params[key] = []any{x}
			return
		}
		if len(d.Content) == 0 {
			p.errorf(v, kp, "empty list")
		}
		vals := make([]any, len(d.Content))
		for j, e := range d.Content {
			ek := elemKey(kp, j, len(vals))
			p.lines[ek] = e.Line
			vals[j], _ = p.value(f.Kind, e, ek)
		}
		w.Params[key] = vals
	})
	return w
}

// mapping reports non-string keys, duplicate keys and, when known is not
// nil, keys not in known, in the mapping n at key path path; it calls visit
// with every other key whose value is not null.
func (p *parser) mapping(n *yaml.Node, path string, known []string, visit func(key, keyPath string, v *yaml.Node)) {
	d := deref(n)
	if d.Kind != yaml.MappingNode {
		p.errorf(n, path, "want a mapping, got %s", describe(d))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(d.Content); i += 2 {
		k, v := d.Content[i], d.Content[i+1]
		kd := deref(k)
		if kd.Kind != yaml.ScalarNode {
			p.errorf(k, path, "want a key, got %s", describe(kd))
			continue
		}
		kp := join(path, kd.Value)
		if line, dup := first[kd.Value]; dup {
			p.errorf(k, kp, "duplicate key %q (first at line %d)", kd.Value, line)
			continue
		}
		first[kd.Value] = k.Line
		if known != nil && !slices.Contains(known, kd.Value) {
			p.errorf(k, kp, "unknown key %q%s", kd.Value, suggest(kd.Value, known))
			continue
		}
		p.lines[kp] = k.Line
		if vd := deref(v); vd.Kind == yaml.ScalarNode && vd.ShortTag() == "!!null" {
			continue
		}
		visit(kd.Value, kp, v)
	}
}

// seq returns the items of the list n at key path path.
func (p *parser) seq(n *yaml.Node, path string) []*yaml.Node {
	d := deref(n)
	if d.Kind != yaml.SequenceNode {
		p.errorf(n, path, "want a list, got %s", describe(d))
		return nil
	}
	return d.Content
}

// value decodes the scalar n at key path path as kind k.
func (p *parser) value(k Kind, n *yaml.Node, path string) (any, bool) {
	v, msg := decode(k, deref(n))
	if msg != "" {
		p.errorf(n, path, "%s", msg)
		return nil, false
	}
	return v, true
}

// top decodes a top-level setting and checks its range.
func (p *parser) top(k Kind, n *yaml.Node, path string) (any, bool) {
	v, ok := p.value(k, n, path)
	if !ok {
		return nil, false
	}
	if msg := checkTop(path, v); msg != "" {
		p.errorf(n, path, "%s", msg)
		return nil, false
	}
	return v, true
}

// decode converts scalar n to kind k, or returns what is wrong with it.
func decode(k Kind, n *yaml.Node) (any, string) {
	fail := fmt.Sprintf("want %s, got %s", k, describe(n))
	if n.Kind != yaml.ScalarNode {
		return nil, fail
	}
	tag := n.ShortTag()
	switch k {
	case KindInt:
		var x int64
		if tag == "!!int" && n.Decode(&x) == nil {
			return x, ""
		}
	case KindSize, KindRate:
		switch tag {
		case "!!int":
			var x int64
			if n.Decode(&x) == nil {
				return x, ""
			}
		case "!!str":
			parse := parseSize
			if k == KindRate {
				parse = parseRate
			}
			x, err := parse(n.Value)
			if err == nil {
				return x, ""
			}
			if err != errNotNumber {
				return nil, fail + ": " + err.Error()
			}
		}
	case KindFloat:
		var x float64
		if (tag == "!!int" || tag == "!!float") && n.Decode(&x) == nil {
			return x, ""
		}
	case KindBool:
		var x bool
		if tag == "!!bool" && n.Decode(&x) == nil {
			return x, ""
		}
	case KindString:
		switch tag {
		case "!!str", "!!int", "!!float", "!!timestamp":
			return n.Value, ""
		}
	case KindDuration:
		if tag == "!!str" || tag == "!!int" {
			if d, err := time.ParseDuration(n.Value); err == nil {
				return d, ""
			}
		}
	}
	return nil, fail
}

// describe names what node n holds, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int", "!!float", "!!bool":
			return n.Value
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// lookup returns the value of the first key named key in mapping n, or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	d := deref(n)
	if d.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(d.Content); i += 2 {
		if k := deref(d.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			if v := deref(d.Content[i+1]); v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				return nil
			}
			return d.Content[i+1]
		}
	}
	return nil
}

// suggest returns ` (did you mean "k"?)` for the known key k closest to key,
// if it is within edit distance 2, else "".
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes, or 3
// (too far for suggest) when their lengths alone differ by more than 2.
func editDistance(a, b string) int {
	if len(a)-len(b) > 2 || len(b)-len(a) > 2 {
		return 3
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
