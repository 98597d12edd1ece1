package workload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// HTTPInfo registers the built-in constant-rate HTTP workload.
func HTTPInfo() Info {
	return Info{
		Name:    "http",
		Summary: "HTTP/1.1 or HTTP/2 (h2c or TLS) GETs at a constant offered rate over N connections, against the agent's server or nginx: requests/s, latency from the intended send time (wrk2 correction), errors, timeouts",
		Params: []scenario.Field{
			{Name: "protocol", Kind: scenario.KindString, Enum: []string{"http1", "http2"}, Default: "http1", List: true,
				Doc: "http1 (HTTP/1.1, one request in flight per connection) or http2 (h2c; over TLS with tls: true; requests multiplexed)"},
			{Name: "rate", Kind: scenario.KindFloat, HasMin: true, Min: 0, List: true,
				Doc: "offered requests/s across all connections, paced (open loop, latency from the intended send time, as wrk2); unset or 0: closed loop"},
			{Name: "connections", Kind: scenario.KindInt, Default: int64(10), HasMin: true, Min: 1, List: true,
				Doc: "TCP connections"},
			sizeField("body_size", "response body bytes", 1024),
			{Name: "path", Kind: scenario.KindString, Default: "/", Doc: "request path (either server answers every path with the body)"},
			{Name: "tls", Kind: scenario.KindBool, Default: false, Doc: "HTTPS (self-signed certificate made per trial, not verified)"},
			{Name: "streams", Kind: scenario.KindInt, Default: int64(1), HasMin: true, Min: 1, List: true,
				Doc: "closed loop over http2 only: requests in flight per connection (h2load -m)"},
			{Name: "threads", Kind: scenario.KindInt, Default: int64(1), HasMin: true, Min: 1,
				Doc: "client event loops, each on its own thread, sharing the connections (wrk -t); TLS runs on net/http and ignores it"},
			{Name: "server", Kind: scenario.KindString, Enum: []string{"builtin", "nginx"}, Default: "builtin",
				Doc: "builtin: the agent's own server (Go net/http); nginx: Debian's nginx, one worker process, serving a static file (its CPU counts master and worker)"},
		},
		New:  func() Workload { return HTTP{} },
		Pods: true,
	}
}

// HTTP is the http workload: `spanperf agent http` in the client site
// against `spanperf agent http-serve` or nginx in the server site. Its zero
// value is what `type: http` runs.
type HTTP struct {
	// ServerDelay holds every response of the agent's server this long
	// before it is written (its --delay): a service of known latency and
	// capacity, for known-answer tests. It is not a scenario parameter, and
	// server: nginx refuses it.
	ServerDelay time.Duration
}

var _ Workload = HTTP{}

// Run implements Workload.
func (w HTTP) Run(ctx context.Context, env Env) (*Result, error) {
	p := env.Params
	tlsOn, _ := p["tls"].(bool)
	nginx := stringParam(p, "server", "builtin") == "nginx"
	if nginx && w.ServerDelay > 0 {
		return nil, errors.New("http: server: nginx cannot delay its responses (ServerDelay is for server: builtin)")
	}
	// The scenario's default when body_size is absent (a caller in Go).
	body := strconv.FormatInt(intParam(p, "body_size", 1024), 10)
	cliArgs := []string{"http", "--target", env.Target.String(), "--body-size", body,
		"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
	if tlsOn {
		cliArgs = append(cliArgs, "--tls")
	}
	for k, f := range map[string]string{"protocol": "--protocol", "rate": "--rate", "connections": "--connections", "path": "--path",
		"streams": "--streams", "threads": "--threads"} {
		if v, ok := p[k]; ok {
			cliArgs = append(cliArgs, f, results.FormatValue(v))
		}
	}
	var srv testbed.Process
	if nginx {
		ng, err := StartNginx(ctx, env.Server, NginxSpec{Port: env.Port, BodySize: intParam(p, "body_size", 1024),
			HTTP2: stringParam(p, "protocol", "http1") == "http2", TLS: tlsOn, MkdirTemp: env.MkdirTemp})
		if err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		defer ng.Close()
		srv = ng.proc
	} else {
		srvArgs := []string{"http-serve", "--listen", ":" + strconv.Itoa(env.Port), "--body-size", body}
		if tlsOn {
			srvArgs = append(srvArgs, "--tls")
		}
		if w.ServerDelay > 0 {
			srvArgs = append(srvArgs, "--delay", w.ServerDelay.String())
		}
		var err error
		if srv, err = startAgent(ctx, env.Server, "agent-http-server", srvArgs...); err != nil {
			return nil, err
		}
		defer srv.Stop(time.Second)
	}
	// The client waits for requests still in flight at the end, each
	// bounded by its 10 s timeout. The server's CPU (cpu_seconds_server)
	// is its process tree's: nginx's master and its workers; in a pod,
	// nginx's server container's cgroup (the agent's own server in a pod
	// is not measured).
	return runAgentClient(ctx, env, srv, "http", cliArgs, 40*time.Second)
}
