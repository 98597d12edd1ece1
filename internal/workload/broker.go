package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/probe"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Brokers the messaging workload starts.
const (
	BrokerRabbitMQ = "rabbitmq"
	BrokerNATS     = "nats"
)

// Debian's programs and packages for the brokers. RabbitMQ's server script
// is run directly, not through /usr/sbin's wrapper, which would run it
// through su with a login environment of its own.
var (
	rabbitmqTool = Tool{Prog: "/usr/lib/rabbitmq/bin/rabbitmq-server", Pkg: "rabbitmq-server"}
	epmdTool     = Tool{Prog: "epmd", Pkg: "erlang-base"}
	natsTool     = Tool{Prog: "nats-server", Pkg: "nats-server"}
)

// rabbitmqUser is the user RabbitMQ runs as when spanperf runs as root
// (Debian's package makes it; its files must be the user's).
const rabbitmqUser = "rabbitmq"

// epmdPort is Erlang's port mapper's port, inside the server site's
// network namespace.
const epmdPort = 4369

// Startup limits: RabbitMQ 3.10 boots in about 9 s on this kind of
// machine, more under load; nats-server in milliseconds.
const (
	rabbitmqStartLimit = 90 * time.Second
	natsStartLimit     = 15 * time.Second
)

// BrokerSpec says which broker StartBroker starts and how.
type BrokerSpec struct {
	// Kind is BrokerRabbitMQ or BrokerNATS.
	Kind string
	// Port is the client port (AMQP 0-9-1 or NATS), on every address of
	// the site.
	Port int
	// Plugins are RabbitMQ plugins to enable (the enabled-plugins file);
	// none by default. NATS takes none.
	Plugins []string
	// ExtraConfig is appended to the broker's config file as is (RabbitMQ's
	// rabbitmq.conf, nats-server's config): for tests, and for settings
	// spanperf has no key for.
	ExtraConfig string
	// MkdirTemp makes the broker's directory (Env.MkdirTemp); nil means
	// os.MkdirTemp.
	MkdirTemp func(kind string) (string, error)
	// Stream (RabbitMQ only) makes Port the stream protocol's port (the
	// rabbitmq_stream plugin, RabbitMQStreamConfig) and AMQP listen
	// nowhere; AdvertisedHost is the address the broker tells stream
	// clients it is at (its own address in its site; unset, 127.0.0.1).
	Stream         bool
	AdvertisedHost string
}

// sameBroker reports whether a broker started from s serves a trial that
// asks for o: same kind, port, extra config and stream listener (a stream
// broker has no AMQP listener), and every plugin o wants enabled (the directory is the broker's own either way).
func (s BrokerSpec) sameBroker(o BrokerSpec) bool {
	return s.Kind == o.Kind && s.Port == o.Port && s.ExtraConfig == o.ExtraConfig &&
		s.Stream == o.Stream && s.AdvertisedHost == o.AdvertisedHost &&
		!slices.ContainsFunc(o.Plugins, func(p string) bool { return !slices.Contains(s.Plugins, p) })
}

// Validate reports a spec StartBroker cannot start.
func (s BrokerSpec) Validate() error {
	switch {
	case s.Kind != BrokerRabbitMQ && s.Kind != BrokerNATS:
		return fmt.Errorf("broker %q: want %s or %s", s.Kind, BrokerRabbitMQ, BrokerNATS)
	case s.Port <= 0 || s.Port > 65535:
		return fmt.Errorf("broker port %d out of range", s.Port)
	case s.Kind == BrokerNATS && (len(s.Plugins) > 0 || s.Stream):
		return errors.New("broker nats takes no plugins (nor streams)")
	case s.Kind == BrokerRabbitMQ && s.Port == epmdPort:
		return fmt.Errorf("broker port %d is epmd's", s.Port)
	}
	return nil
}

// CheckBroker says whether the broker kind's programs are installed,
// naming the Debian package that provides what is missing.
func CheckBroker(kind string) error {
	switch kind {
	case BrokerRabbitMQ:
		errs := []error{rabbitmqTool.Check(), epmdTool.Check()}
		if os.Geteuid() == 0 {
			if _, err := user.Lookup(rabbitmqUser); err != nil {
				errs = append(errs, fmt.Errorf("%w: user %s not found (Debian package %s makes it)", testbed.ErrNotSupported, rabbitmqUser, rabbitmqTool.Pkg))
			}
			errs = append(errs, setprivTool.Check())
		}
		return errors.Join(errs...)
	case BrokerNATS:
		return natsTool.Check()
	}
	return fmt.Errorf("broker %q: want %s or %s", kind, BrokerRabbitMQ, BrokerNATS)
}

// Broker is a message broker running in a site from a throwaway directory
// that holds its configuration, data and logs. Close stops it (and, for
// RabbitMQ, the epmd started for it) and removes the directory.
type Broker struct {
	spec BrokerSpec
	proc testbed.Process
	epmd testbed.Process
	dir  string
	out  *testbed.SyncBuffer
	// StartTime is how long the broker took from its start to accepting
	// clients.
	StartTime time.Duration
}

// StartBroker starts the broker spec names in site and waits until it
// accepts clients on spec.Port. A broker that exits or fails to listen is
// an error that quotes the line of its log that says why (BrokerLogError).
// On error nothing is left behind.
func StartBroker(ctx context.Context, site testbed.Site, spec BrokerSpec) (_ *Broker, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := CheckBroker(spec.Kind); err != nil {
		return nil, err
	}
	mk := spec.MkdirTemp
	if mk == nil {
		mk = func(kind string) (string, error) { return os.MkdirTemp("", "spanperf-"+kind+"-") }
	}
	dir, err := mk("broker")
	if err != nil {
		return nil, err
	}
	b := &Broker{spec: spec, dir: dir, out: &testbed.SyncBuffer{}}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	start := time.Now()
	switch spec.Kind {
	case BrokerRabbitMQ:
		err = b.startRabbitMQ(ctx, site)
	default:
		err = b.startNATS(ctx, site)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", spec.Kind, site.Name(), err)
	}
	b.StartTime = time.Since(start)
	return b, nil
}

// Process is the broker's process (its tree holds the broker's threads
// and helpers; epmd is not in it).
func (b *Broker) Process() testbed.Process { return b.proc }

// Log is what the broker has written to stdout and stderr so far.
func (b *Broker) Log() string { return b.out.String() }

// RSSBytes is the resident memory of the broker's process tree now.
func (b *Broker) RSSBytes() (float64, error) {
	pid, ok := testbed.PIDOf(b.proc)
	if !ok {
		return 0, errNotLocal
	}
	return probe.TreeRSSBytes(pid)
}

// Close stops the broker and epmd, and removes the broker's directory.
func (b *Broker) Close() error {
	var errs []error
	if b.proc != nil {
		// SIGTERM to the group: RabbitMQ's script, beam and its port
		// helpers; nats-server exits on it at once.
		if err := b.proc.Stop(15 * time.Second); err != nil && !isSignalExit(err) {
			errs = append(errs, fmt.Errorf("stop %s: %w", b.spec.Kind, err))
		}
	}
	if b.epmd != nil {
		b.epmd.Stop(2 * time.Second)
	}
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// isSignalExit reports whether err is the exit of a process ended by a
// signal (what Stop's SIGTERM leaves), not a failure.
func isSignalExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// asUser returns the command line prefix that runs a program as user
// (setpriv, as for postgres) when this process is root, with the user's
// uid and gid; nothing otherwise.
func asUser(name string) (prefix []string, uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, 0, 0, err
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	setpriv, err := exec.LookPath(setprivTool.Prog)
	if err != nil {
		return nil, 0, 0, setprivTool.Check()
	}
	// --pdeathsig keep: see findPostgres.
	return []string{setpriv, "--reuid=" + name, "--regid=" + name, "--clear-groups", "--pdeathsig=keep", "--"}, uid, gid, nil
}

// RabbitMQConfig is the rabbitmq.conf StartBroker writes for port: guest
// may log in from any address (the sites' networks are the run's own),
// AMQP on port on every address, the log on the console only.
func RabbitMQConfig(port int) string {
	return "loopback_users = none\n" +
		"listeners.tcp.default = " + strconv.Itoa(port) + "\n" +
		"log.console = true\nlog.console.level = info\nlog.file = false\n"
}

// rabbitmqEnv is the environment of a private RabbitMQ whose every file
// lives under dir.
func rabbitmqEnv(dir string, port int) []string {
	return []string{
		"HOME=" + dir,
		"RABBITMQ_NODENAME=spanperf@localhost",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort(port)),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_FEATURE_FLAGS_FILE=" + filepath.Join(dir, "feature_flags"),
		"RABBITMQ_PLUGINS_EXPAND_DIR=" + filepath.Join(dir, "plugins-expand"),
		"RABBITMQ_QUORUM_DIR=" + filepath.Join(dir, "quorum"),
		"RABBITMQ_STREAM_DIR=" + filepath.Join(dir, "stream"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "rabbitmq.pid"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		// A crash dump goes to the working directory unless told.
		"ERL_CRASH_DUMP=" + filepath.Join(dir, "erl_crash.dump"),
		"LC_ALL=C.UTF-8",
	}
}

// distPort is RabbitMQ's inter-node port: the client port plus 20000
// (RabbitMQ's own convention), or below it when that overflows.
func distPort(port int) int {
	if port+20000 <= 65535 {
		return port + 20000
	}
	return port - 20000
}

func (b *Broker) startRabbitMQ(ctx context.Context, site testbed.Site) error {
	prefix, uid, gid, err := asUser(rabbitmqUser)
	if err != nil {
		return err
	}
	dir := b.dir
	conf, pl := rabbitmqConfigFor(b.spec)
	plugins := "[" + strings.Join(pl, ",") + "].\n"
	files := map[string]string{
		"rabbitmq.conf":     conf + b.spec.ExtraConfig,
		"advanced.config":   "[].\n",
		"rabbitmq-env.conf": "",
		"enabled_plugins":   plugins,
		".erlang.cookie":    "SPANPERF" + strconv.FormatInt(time.Now().UnixNano(), 36) + "\n",
	}
	for name, text := range files {
		perm := os.FileMode(0o644)
		if name == ".erlang.cookie" {
			perm = 0o400
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), perm); err != nil {
			return err
		}
	}
	for _, sub := range []string{"mnesia", "log", "plugins-expand", "quorum", "stream"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if uid >= 0 {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}); err != nil {
			return err
		}
	}
	// epmd first, in the foreground, so that it is this run's child in
	// the site's namespace and Close can stop it; the node finds it there
	// rather than starting one that daemonises and outlives the run.
	epmdPath, _ := exec.LookPath(epmdTool.Prog)
	b.epmd, err = startToolServer(ctx, site, testbed.Command{Name: "epmd", Path: epmdPath,
		Args: []string{"-address", "127.0.0.1", "-port", strconv.Itoa(epmdPort)}}, epmdPort)
	if err != nil {
		return err
	}
	argv := append(slices.Clone(prefix), rabbitmqTool.Prog)
	b.proc, err = site.Exec(ctx, testbed.Command{Name: "rabbitmq", Path: argv[0], Args: argv[1:],
		Env: rabbitmqEnv(dir, b.spec.Port), Stdout: b.out, Stderr: b.out})
	if err != nil {
		return err
	}
	if err := b.waitReady(ctx, rabbitmqStartLimit); err != nil {
		return err
	}
	return b.waitPlugins()
}

// NATSConfig is the nats-server config StartBroker writes: clients on port
// on every address, the pid file in dir, no JetStream.
func NATSConfig(port int, dir string) string {
	return "listen: \"0.0.0.0:" + strconv.Itoa(port) + "\"\n" +
		"pid_file: \"" + filepath.Join(dir, "nats.pid") + "\"\n" +
		"max_payload: 8MB\n"
}

func (b *Broker) startNATS(ctx context.Context, site testbed.Site) error {
	conf := filepath.Join(b.dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(NATSConfig(b.spec.Port, b.dir)+b.spec.ExtraConfig), 0o644); err != nil {
		return err
	}
	path, _ := exec.LookPath(natsTool.Prog)
	var err error
	b.proc, err = site.Exec(ctx, testbed.Command{Name: "nats-server", Path: path, Args: []string{"-c", conf},
		Stdout: b.out, Stderr: b.out})
	if err != nil {
		return err
	}
	return b.waitReady(ctx, natsStartLimit)
}

// rabbitmqStarted is what RabbitMQ logs when its boot has finished.
const rabbitmqStarted = "Server startup complete"

// waitReady waits until the broker listens on its port (RabbitMQ: and has
// logged rabbitmqStarted), failing fast with
// its log's reason when it exits first.
func (b *Broker) waitReady(ctx context.Context, limit time.Duration) error {
	pid, local := testbed.PIDOf(b.proc)
	if !local {
		return errors.New("broker: only local sites")
	}
	deadline := time.Now().Add(limit)
	for {
		// RabbitMQ opens its listeners a little before its boot ends:
		// wait for the line that says it has.
		if listening(pid, b.spec.Port) && (b.spec.Kind != BrokerRabbitMQ || strings.Contains(b.Log(), rabbitmqStarted)) {
			return nil
		}
		select {
		case <-b.proc.Done():
			how := "exited while starting"
			if err := b.proc.Wait(); err != nil {
				how += " (" + err.Error() + ")"
			}
			return fmt.Errorf("%s: %s", how, BrokerLogError(b.spec.Kind, b.Log()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d after %s: %s", b.spec.Port, limit, BrokerLogError(b.spec.Kind, b.Log()))
		}
	}
}

// What BrokerLogError looks for.
var (
	// rabbitmqError is a line of RabbitMQ's console log at level error:
	// the text after the Erlang pid is the message.
	rabbitmqError = regexp.MustCompile(`^\S+ \S+ \[error\] <[0-9.]+> ?(.*)$`)
	rabbitmqLast  = []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Error during startup: .*$`),
		regexp.MustCompile(`(?m)^Kernel pid terminated.*$`),
	}
	natsFailure = []*regexp.Regexp{
		regexp.MustCompile(`(?m)^.*\[FTL\].*$`),
		regexp.MustCompile(`(?m)^nats-server: .*$`),
		regexp.MustCompile(`(?m)^.*\[ERR\].*$`),
	}
)

// BrokerLogError returns the line of a broker's log (stdout and stderr)
// that says why it failed to start, trimmed to 300 bytes. For RabbitMQ,
// its first error message with the detail lines ("  - ...") that follow
// it (a configuration error names the key and the value; a listener that
// failed, its address and the reason, without its listen options), else its
// "Error during startup" or "Kernel pid terminated" line; for NATS, its
// fatal line or its command-line or config error (which names the config
// file's line). With none of those, the last non-empty line.
func BrokerLogError(kind, log string) string {
	if kind == BrokerRabbitMQ {
		if msg := rabbitmqFirstError(log); msg != "" {
			return truncate(shortenRabbitMQError(msg), 300)
		}
	}
	pats := natsFailure
	if kind == BrokerRabbitMQ {
		pats = rabbitmqLast
	}
	for _, re := range pats {
		if m := re.FindString(log); m != "" {
			return truncate(strings.TrimSpace(m), 300)
		}
	}
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return truncate(l, 300)
		}
	}
	return "(no log)"
}

// rabbitmqFirstError returns RabbitMQ's first non-empty error message and
// the detail lines right after it, joined; "" when it logged none.
func rabbitmqFirstError(log string) string {
	var parts []string
	for _, l := range strings.Split(log, "\n") {
		m := rabbitmqError.FindStringSubmatch(strings.TrimRight(l, "\r"))
		msg := ""
		if m != nil {
			msg = strings.TrimRight(m[1], " ")
		}
		if len(parts) == 0 {
			if strings.TrimSpace(msg) != "" {
				parts = append(parts, strings.TrimSpace(msg))
			}
			continue
		}
		d, ok := strings.CutPrefix(strings.TrimSpace(msg), "- ")
		if !ok || len(parts) == 4 {
			break
		}
		parts = append(parts, d)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return parts[0] + " " + strings.Join(parts[1:], "; ")
}
