package workload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/pki"
	"github.com/spanperf/spanperf/internal/testbed"
)

// NginxTool is nginx and its Debian package.
var NginxTool = Tool{Prog: "nginx", Pkg: "nginx"}

// NginxBodyPath is the URL path of the fixed-size body an Nginx serves.
// Every other path is answered with the same body, as the agent's own
// server does, rewritten to this one.
const NginxBodyPath = "/body"

// NginxSpec says what an Nginx serves.
type NginxSpec struct {
	// Port is the port nginx listens on, on every address.
	Port int
	// BodySize is the size in bytes of the body served at NginxBodyPath.
	BodySize int64
	// HTTP2 serves HTTP/2 instead of HTTP/1.1: cleartext with prior
	// knowledge (h2c), or over TLS by ALPN (offering HTTP/1.1 too).
	HTTP2 bool
	// TLS serves HTTPS with a self-signed certificate made for this Nginx
	// and removed with its directory by Close.
	TLS bool
	// Workers is nginx's worker_processes; 0 means 1.
	Workers int
	// MkdirTemp makes nginx's directory (see Env.MkdirTemp); nil means
	// os.MkdirTemp in the system's temp dir.
	MkdirTemp func(kind string) (string, error)
}

// Nginx is Debian's nginx started in a site with a generated config and a
// throwaway directory holding the config, the body and nginx's temp files.
// In a pod site it is the server image's nginx, in the pod's server
// container, and its directory is in that container's /tmp.
type Nginx struct {
	proc testbed.Process
	// dir is the local directory Close removes; "" in a pod.
	dir string
}

// StartNginx writes the config and body, starts nginx (in the foreground)
// in site and waits until it listens. On error nothing is left behind.
func StartNginx(ctx context.Context, site testbed.Site, spec NginxSpec) (*Nginx, error) {
	if spec.Workers <= 0 {
		spec.Workers = 1
	}
	if ps, ok := site.(testbed.PodSite); ok {
		return startPodNginx(ctx, ps, spec)
	}
	if err := NginxTool.Check(); err != nil {
		return nil, err
	}
	dir, err := Env{MkdirTemp: spec.MkdirTemp}.mkdirTemp("nginx")
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
	var cert string
	if err == nil && spec.TLS {
		cert, err = nginxCert(dir)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(nginxConfig(dir, www, cert, spec)), 0o644)
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

// startPodNginx starts nginx in the server container of a pod site:
// its files, in /tmp/spanperf-nginx-PORT there (each trial's overwrite
// the last's; the pod's /tmp goes with the run's namespace), are written
// through the agent, and the certificate, when spec.TLS, is made here
// and copied in.
func startPodNginx(ctx context.Context, site testbed.PodSite, spec NginxSpec) (*Nginx, error) {
	if site.ServerImage() == "" {
		return nil, fmt.Errorf("nginx: site %s is a pod: name an image that has nginx with server_image: in the scenario (or --server-image)", site.Name())
	}
	dir := fmt.Sprintf("/tmp/spanperf-nginx-%d", spec.Port)
	www := dir + "/www"
	files := []podFile{{www + "/body", bytes.Repeat([]byte("x"), int(spec.BodySize)), 0o644}}
	var cert string
	if spec.TLS {
		local, err := os.MkdirTemp("", "spanperf-nginx-cert-")
		if err != nil {
			return nil, fmt.Errorf("nginx: %w", err)
		}
		defer os.RemoveAll(local)
		lc, err := nginxCert(local)
		if err != nil {
			return nil, fmt.Errorf("nginx: %w", err)
		}
		b, err := os.ReadFile(lc)
		if err != nil {
			return nil, fmt.Errorf("nginx: %w", err)
		}
		cert = dir + "/tls/nginx.pem"
		files = append(files, podFile{cert, b, 0o600})
	}
	files = append(files, podFile{dir + "/nginx.conf", []byte(nginxConfig(dir, www, cert, spec)), 0o644})
	for _, f := range files {
		if err := writeFile(ctx, site, f.path, f.data, f.perm, ""); err != nil {
			return nil, fmt.Errorf("nginx: %s: %w", site.Where(true), err)
		}
	}
	p, err := startToolServer(ctx, site, testbed.Command{Name: "nginx", Path: "nginx", Server: true,
		Args: []string{"-e", "stderr", "-p", dir, "-c", dir + "/nginx.conf"}}, spec.Port)
	if err != nil {
		return nil, fmt.Errorf("nginx: %w", err)
	}
	return &Nginx{proc: podServer{Process: p, site: site}}, nil
}

// podServer is a server in a pod's server container, whose CPU is that
// container's cgroup's: the server's processes and the agent's idle
// sleep (and the brief `agent cpu` that reads it).
type podServer struct {
	testbed.Process
	site testbed.Site
}

// cpuSeconds implements remoteCPU.
func (p podServer) cpuSeconds() (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := podAgentOutput(ctx, p.site, "cpu")
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

// podFile is a file a server in a pod site reads.
type podFile struct {
	path string
	data []byte
	perm os.FileMode
}

// nginxCert issues a certificate for nginx from a CA made for it alone
// (pki.CA, in dir/tls, removed with dir) and returns the file that
// holds the certificate and its key. nginx's master reads it as root
// before its workers drop privileges, so the file keeps mode 0600.
func nginxCert(dir string) (string, error) {
	ca, err := pki.New(filepath.Join(dir, "tls"), "spanperf nginx")
	if err != nil {
		return "", err
	}
	c, err := ca.Issue("nginx")
	if err != nil {
		return "", err
	}
	return c.File, nil
}

// nginxConfig is the generated configuration: foreground, no access log,
// keepalive without a request limit, every path inside dir; cert, when
// spec.TLS, holds the certificate and its key. NginxBodyPath is served as
// a static file; every other path is rewritten to it. nginx 1.22 (Debian
// 12) takes HTTP/2 as a listen parameter ("http2 on;" came in 1.25.1).
func nginxConfig(dir, www, cert string, spec NginxSpec) string {
	listen := strconv.Itoa(spec.Port)
	if spec.TLS {
		listen += " ssl"
	}
	if spec.HTTP2 {
		listen += " http2"
	}
	var tls string
	if spec.TLS {
		tls = fmt.Sprintf("\n    ssl_certificate %[1]s;\n    ssl_certificate_key %[1]s;", cert)
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
  # As the agent's server: a client may open many streams at once.
  http2_max_concurrent_streams 1000;
  server {
    listen %[3]s;%[5]s
    root %[4]s;
    location = %[6]s { }
    location / { rewrite ^ %[6]s break; }
  }
}
`, spec.Workers, dir, listen, www, tls, NginxBodyPath)
}

// PID is the nginx master's PID (its workers are its children); 0 when
// nginx does not run on the controller's machine.
func (n *Nginx) PID() int {
	pid, _ := testbed.PIDOf(n.proc)
	return pid
}

// Done is closed when nginx has exited.
func (n *Nginx) Done() <-chan struct{} { return n.proc.Done() }

// Close stops nginx and removes its directory.
func (n *Nginx) Close() error {
	err := n.proc.Stop(2 * time.Second)
	if n.dir == "" {
		return err
	}
	if rerr := os.RemoveAll(n.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
