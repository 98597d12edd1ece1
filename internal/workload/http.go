package workload

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
)

// HTTPInfo registers the built-in constant-rate HTTP workload.
func HTTPInfo() Info {
	return Info{
		Name:    "http",
		Summary: "HTTP/1.1 or HTTP/2 (h2c or TLS) GETs at a constant offered rate over N connections: requests/s, latency from the intended send time (wrk2 correction), errors, timeouts",
		Params: []scenario.Field{
			{Name: "protocol", Kind: scenario.KindString, Enum: []string{"http1", "http2"}, Default: "http1", List: true,
				Doc: "http1 (HTTP/1.1, one request in flight per connection) or http2 (h2c; over TLS with tls: true; requests multiplexed)"},
			{Name: "rate", Kind: scenario.KindFloat, HasMin: true, Min: 0, List: true,
				Doc: "offered requests/s across all connections, paced (open loop, latency from the intended send time, as wrk2); unset or 0: closed loop"},
			{Name: "connections", Kind: scenario.KindInt, Default: int64(10), HasMin: true, Min: 1, List: true,
				Doc: "TCP connections"},
			sizeField("body_size", "response body bytes", 1024),
			{Name: "path", Kind: scenario.KindString, Default: "/", Doc: "request path"},
			{Name: "tls", Kind: scenario.KindBool, Default: false, Doc: "HTTPS (self-signed certificate made per trial, not verified)"},
			{Name: "server", Kind: scenario.KindString, Enum: []string{"builtin", "nginx"}, Default: "builtin",
				Doc: "builtin: the agent's own server; nginx: Debian's nginx (not built yet)"},
		},
		New: func() Workload { return httpWorkload{} },
	}
}

// httpWorkload runs `spanperf agent http-serve` in the server site and
// `spanperf agent http` in the client site.
type httpWorkload struct{}

var _ Workload = httpWorkload{}

// errNginxNotBuilt is returned for server: nginx until it exists.
var errNginxNotBuilt = errors.New("http: server: nginx is not built yet; use server: builtin")

func (httpWorkload) Run(ctx context.Context, env Env) (*Result, error) {
	p := env.Params
	if s, _ := p["server"].(string); s == "nginx" {
		return nil, errNginxNotBuilt
	}
	tlsOn, _ := p["tls"].(bool)
	srvArgs := []string{"http-serve", "--listen", ":" + strconv.Itoa(env.Port)}
	cliArgs := []string{"http", "--target", env.Target.String(),
		"--duration", env.Duration.String(), "--warmup", env.Warmup.String()}
	if tlsOn {
		srvArgs = append(srvArgs, "--tls")
		cliArgs = append(cliArgs, "--tls")
	}
	if v, ok := p["body_size"]; ok {
		srvArgs = append(srvArgs, "--body-size", results.FormatValue(v))
		cliArgs = append(cliArgs, "--body-size", results.FormatValue(v))
	}
	for k, f := range map[string]string{"protocol": "--protocol", "rate": "--rate", "connections": "--connections", "path": "--path"} {
		if v, ok := p[k]; ok {
			cliArgs = append(cliArgs, f, results.FormatValue(v))
		}
	}
	srv, err := startAgent(ctx, env.Server, "agent-http-server", srvArgs...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop(time.Second)
	// The client waits for requests still in flight at the end, each
	// bounded by its 10 s timeout.
	return runAgentClient(ctx, env, srv, "http", cliArgs, 40*time.Second)
}
