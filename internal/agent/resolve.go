package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ResolveTimeout bounds the name lookup of a client's target.
const ResolveTimeout = 10 * time.Second

// SplitTarget checks the form of a --target, HOST:PORT, and splits it.
func SplitTarget(target string) (host string, port uint16, err error) {
	host, ps, err := net.SplitHostPort(target)
	if err != nil {
		return "", 0, fmt.Errorf("target %q: %w", target, err)
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("target %q: bad port %q", target, ps)
	}
	if host == "" {
		return "", 0, fmt.Errorf("target %q: no host", target)
	}
	return host, uint16(p), nil
}

// clientMain is the tail every client subcommand shares: it checks and
// resolves target (exit 2 for a malformed one), calls run with the
// address, and writes its Result, or the error as one, to stdout as JSON
// (exit 1 on an error, which stderr also gets).
func clientMain(name, target string, stdout, stderr io.Writer, run func(netip.AddrPort) (*Result, error)) int {
	if _, _, err := SplitTarget(target); err != nil {
		fmt.Fprintf(stderr, "agent %s: --target: %v\n", name, err)
		return 2
	}
	addr, err := ResolveTarget(context.Background(), target)
	if err != nil {
		json.NewEncoder(stdout).Encode(&Result{Error: err.Error()})
		return 1
	}
	res, err := run(addr)
	if err != nil {
		res = &Result{Error: strings.TrimSpace(err.Error())}
	}
	json.NewEncoder(stdout).Encode(res)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// ResolveTarget parses a client's --target, HOST:PORT, where HOST is an IP
// address or a name: a name is looked up once, here, before the client
// connects (in a pod: the cluster's DNS, e.g. a Kubernetes service name),
// and its first IPv4 address is used, else its first address.
func ResolveTarget(ctx context.Context, target string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(target); err == nil {
		return ap, nil
	}
	host, p, err := SplitTarget(target)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("target %q: resolve %s: %w", target, host, err)
	}
	if len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("target %q: %s has no address", target, host)
	}
	a := addrs[0]
	for _, x := range addrs {
		if x.Unmap().Is4() {
			a = x
			break
		}
	}
	return netip.AddrPortFrom(a.Unmap(), p), nil
}
