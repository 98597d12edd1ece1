package workload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/testbed"
)

// NginxTool is nginx and its Debian package.
var NginxTool = Tool{Prog: "nginx", Pkg: "nginx"}

// NginxBodyPath is the URL path of the fixed-size body an Nginx serves.
const NginxBodyPath = "/body"

// NginxSpec says what an Nginx serves.
type NginxSpec struct {
	// Port is the port nginx listens on, on every address.
	Port int
	// BodySize is the size in bytes of the body served at NginxBodyPath.
	BodySize int64
	// HTTP2 serves cleartext HTTP/2 with prior knowledge (h2c) instead of
	// HTTP/1.1.
	HTTP2 bool
	// Workers is nginx's worker_processes; 0 means 1.
	Workers int
}

// Nginx is Debian's nginx started in a site with a generated config and a
// throwaway directory holding the config, the body and nginx's temp files.
type Nginx struct {
	proc testbed.Process
	dir  string
}

// StartNginx writes the config and body, starts nginx (in the foreground)
// in site and waits until it listens. On error nothing is left behind.
func StartNginx(ctx context.Context, site testbed.Site, spec NginxSpec) (*Nginx, error) {
	if err := NginxTool.Check(); err != nil {
		return nil, err
	}
	if spec.Workers <= 0 {
		spec.Workers = 1
	}
	dir, err := os.MkdirTemp("", "spanperf-nginx-")
	if err != nil {
		return nil, fmt.Errorf("nginx: %w", err)
	}
	// nginx's workers run as nobody when started by root: they must read the body.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx: %w", err)
	}
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(www, "body"), bytes.Repeat([]byte("x"), int(spec.BodySize)), 0o644)
	}
	conf := nginxConfig(dir, www, spec)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx: %w", err)
	}
	p, err := startToolServer(ctx, site, testbed.Command{Name: "nginx", Path: "nginx",
		Args: []string{"-e", "stderr", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")}}, spec.Port)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nginx: %w", err)
	}
	return &Nginx{proc: p, dir: dir}, nil
}

// nginxConfig is the generated configuration: foreground, no access log,
// keepalive without a request limit, every path inside dir.
func nginxConfig(dir, www string, spec NginxSpec) string {
	listen := strconv.Itoa(spec.Port)
	if spec.HTTP2 {
		listen += " http2"
	}
	return fmt.Sprintf(`daemon off;
worker_processes %d;
pid %[2]s/nginx.pid;
error_log stderr warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path %[2]s/client_body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  keepalive_requests 1000000000;
  keepalive_timeout 600s;
  server {
    listen %[3]s;
    root %[4]s;
  }
}
`, spec.Workers, dir, listen, www)
}

// PID is the nginx master's PID (its workers are its children).
func (n *Nginx) PID() int { return n.proc.PID() }

// Done is closed when nginx has exited.
func (n *Nginx) Done() <-chan struct{} { return n.proc.Done() }

// Close stops nginx and removes its directory.
func (n *Nginx) Close() error {
	err := n.proc.Stop(2 * time.Second)
	if rerr := os.RemoveAll(n.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
