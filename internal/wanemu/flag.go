package wanemu

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// FormatRoute renders r as ParseRoute reads it:
// "FROM>TO:delay=D,jitter=J,loss=L,rate=BPS,queue=BYTES" (zero values left out).
func FormatRoute(r Route) string {
	var kv []string
	l := r.Link
	if l.Delay > 0 {
		kv = append(kv, "delay="+l.Delay.String())
	}
	if l.Jitter > 0 {
		kv = append(kv, "jitter="+l.Jitter.String())
	}
	if l.Loss > 0 {
		kv = append(kv, "loss="+strconv.FormatFloat(l.Loss, 'g', -1, 64))
	}
	if l.RateBPS > 0 {
		kv = append(kv, "rate="+strconv.FormatInt(l.RateBPS, 10))
	}
	if l.QueueBytes > 0 {
		kv = append(kv, "queue="+strconv.FormatInt(l.QueueBytes, 10))
	}
	return r.From.String() + ">" + r.To.String() + ":" + strings.Join(kv, ",")
}

// ParseRoute reads a route as FormatRoute writes it.
func ParseRoute(s string) (Route, error) {
	var r Route
	pair, kvs, _ := strings.Cut(s, ":")
	from, to, ok := strings.Cut(pair, ">")
	if !ok {
		return r, fmt.Errorf("route %q: want FROM>TO:key=value,...", s)
	}
	var err error
	if r.From, err = netip.ParsePrefix(from); err != nil {
		return r, fmt.Errorf("route %q: from: %w", s, err)
	}
	if r.To, err = netip.ParsePrefix(to); err != nil {
		return r, fmt.Errorf("route %q: to: %w", s, err)
	}
	for _, kv := range strings.Split(kvs, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "delay", "jitter":
			d, err := time.ParseDuration(v)
			if err != nil {
				return r, fmt.Errorf("route %q: %s: %w", s, k, err)
			}
			if k == "delay" {
				r.Link.Delay = d
			} else {
				r.Link.Jitter = d
			}
		case "loss":
			if r.Link.Loss, err = strconv.ParseFloat(v, 64); err != nil {
				return r, fmt.Errorf("route %q: loss: %w", s, err)
			}
		case "rate", "queue":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return r, fmt.Errorf("route %q: %s: %w", s, k, err)
			}
			if k == "rate" {
				r.Link.RateBPS = n
			} else {
				r.Link.QueueBytes = n
			}
		default:
			return r, fmt.Errorf("route %q: unknown key %q (want delay, jitter, loss, rate, queue)", s, k)
		}
	}
	return r, r.Link.Validate()
}
