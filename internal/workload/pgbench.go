package workload

import (
	"bufio"
	"bytes"
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

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// Metrics only the pgbench driver reports.
const (
	// MetricScheduleLagP50 and MetricScheduleLagP99 are percentiles, in
	// seconds, of pgbench's schedule lag in a paced run: how long after its
	// scheduled time a transaction began, because pgbench was late or
	// because every client was still busy. Unlike results.SendLagP50 they
	// cannot tell the two apart; a lag near the latency says the run had
	// too few clients for its rate.
	MetricScheduleLagP50 = "schedule_lag_p50_s"
	MetricScheduleLagP99 = "schedule_lag_p99_s"
	// MetricOfferedPerS is, in a paced run, the rate of the transactions
	// pgbench scheduled in the window (those that began before the run
	// ended). pgbench draws its schedule as Poisson arrivals, so this
	// realized offer differs from target_rate by about 1/√(rate × duration):
	// a run that kept up with its offer can fall short of
	// results.SustainedFraction × target_rate by chance when rate ×
	// duration is small: 15% of the time at 200/s for 2 s, 1% at 200/s for 10 s.
	MetricOfferedPerS = results.OfferedPerS
)

// PostgresGlob is where Debian installs each PostgreSQL major version's
// programs, outside PATH (only pgbench and psql get a wrapper in /usr/bin).
const PostgresGlob = "/usr/lib/postgresql/*/bin"

// postgresPkg is the Debian package that installs initdb, postgres and
// pgbench, and creates the user postgres.
const postgresPkg = "postgresql"

// postgresUser is the user initdb and postgres run as when spanperf runs
// as root, which PostgreSQL refuses; postgresRole is the superuser initdb
// makes, whom pgbench connects as.
const (
	postgresUser = "postgres"
	postgresRole = "postgres"
)

// setprivTool runs a program as another user and then execs it, so that
// signals reach the program itself.
var setprivTool = Tool{Prog: "setpriv", Pkg: "util-linux"}

// PgbenchInfo registers the pgbench driver: PostgreSQL in the server site,
// pgbench through the datapath from the client site. On pod sites both
// run from the run's server image (see Pgbench.Run).
func PgbenchInfo() Info {
	return Info{
		Name:    "pgbench",
		Summary: "pgbench against a throwaway PostgreSQL, flat out or paced at rate: transactions/s, latency percentiles from its per-transaction log, failed transactions",
		Params: []scenario.Field{
			countFieldDefault("clients", "database sessions (pgbench -c)", 4),
			countFieldDefault("jobs", "pgbench threads (pgbench -j; at most clients)", 2),
			{Name: "rate", Kind: scenario.KindFloat, HasMin: true, Min: 0, List: true,
				Doc: "offered transactions/s across all clients (pgbench --rate: Poisson arrivals, latency from the scheduled start); unset or 0: flat out"},
			{Name: "scale", Kind: scenario.KindInt, Default: int64(1), HasMin: true, Min: 1, List: true,
				Doc: "pgbench scale factor: 100000 accounts and one branch per unit (tpcb: clients beyond the branches queue on their rows)"},
			{Name: "mode", Kind: scenario.KindString, Default: "select-only", Enum: []string{"select-only", "tpcb"}, List: true,
				Doc: "select-only: one indexed SELECT per transaction (pgbench -S, the latency-sensitive read path); tpcb: pgbench's TPC-B-like script (3 UPDATEs, a SELECT and an INSERT)"},
			{Name: "query_mode", Kind: scenario.KindString, Default: "simple", Enum: []string{"simple", "extended", "prepared"}, List: true,
				Doc: "how pgbench sends its queries (pgbench -M): simple (one Query message), extended (Parse/Bind/Execute each time) or prepared (parsed once per session, as the Skupper sizing guide's pgbench runs)"},
		},
		New:  func() Workload { return Pgbench{} },
		Pods: true,
	}
}

// Pgbench initialises a throwaway PostgreSQL in the server site for each
// trial and runs pgbench in the client site for the warmup plus the
// duration, rounded up to whole seconds with at least half a second to
// spare (pgbench's clock includes its connecting). Every transaction is
// logged (pgbench -l); the metrics cover those that completed in the
// window that begins a warmup after the first transaction began.
type Pgbench struct{}

var (
	_ Workload = Pgbench{}
	_ Checker  = Pgbench{}
)

// Check says whether initdb, postgres and pgbench are installed and, when
// spanperf runs as root, whether the user postgres and setpriv exist.
func (Pgbench) Check(context.Context) error {
	_, err := findPostgres()
	return err
}

// postgresProgs are the programs a trial runs.
type postgresProgs struct {
	initdb, postgres, pgbench string
	// asUser, when not empty, is the command line that runs the rest as
	// the user postgres; uid and gid are that user's, for the files.
	asUser   []string
	uid, gid int
}

// findPostgres finds initdb, postgres and pgbench, and how to run the
// server as the user postgres when this process is root.
func findPostgres() (*postgresProgs, error) {
	var p postgresProgs
	var errs []error
	var missing []string
	for _, f := range []struct {
		prog string
		path *string
	}{{"initdb", &p.initdb}, {"postgres", &p.postgres}, {"pgbench", &p.pgbench}} {
		path, err := FindPostgres(f.prog, PostgresGlob)
		if err != nil {
			missing = append(missing, f.prog)
		}
		*f.path = path
	}
	if missing != nil {
		errs = append(errs, fmt.Errorf("%w: %s not found in PATH or %s (install Debian package %s)",
			testbed.ErrNotSupported, strings.Join(missing, ", "), PostgresGlob, postgresPkg))
	}
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath(setprivTool.Prog)
		if err != nil {
			errs = append(errs, setprivTool.Check())
		}
		u, err := user.Lookup(postgresUser)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: user %s not found (PostgreSQL refuses to run as root; Debian package %s creates the user)",
				testbed.ErrNotSupported, postgresUser, postgresPkg))
		} else {
			p.uid, _ = strconv.Atoi(u.Uid)
			p.gid, _ = strconv.Atoi(u.Gid)
		}
		// --pdeathsig keep: changing the user clears the parent-death signal
		// the testbed sets, which would let postgres outlive a killed run.
		p.asUser = []string{setpriv, "--reuid=" + postgresUser, "--regid=" + postgresUser, "--clear-groups", "--pdeathsig=keep", "--"}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// FindPostgres returns the path of the PostgreSQL program prog: the one in
// PATH if there is one, else the one in the directory matching glob
// (PostgresGlob on Debian) of the highest PostgreSQL version that has it.
// A program found nowhere is an error wrapping testbed.ErrNotSupported
// that names it and the Debian package postgresql.
func FindPostgres(prog, glob string) (string, error) {
	if path, err := exec.LookPath(prog); err == nil {
		return path, nil
	}
	dirs, _ := filepath.Glob(glob)
	slices.SortFunc(dirs, func(a, b string) int { return -slices.Compare(postgresVersion(a, glob), postgresVersion(b, glob)) })
	for _, d := range dirs {
		if path, err := exec.LookPath(filepath.Join(d, prog)); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: %s not found in PATH or %s (install Debian package %s)", testbed.ErrNotSupported, prog, glob, postgresPkg)
}

// postgresVersion returns the numbers of the version in dir, the part of
// dir that glob's first "*" matched: [15] for /usr/lib/postgresql/15/bin,
// [9 6] for .../9.6/bin.
func postgresVersion(dir, glob string) []int {
	pre, post, _ := strings.Cut(glob, "*")
	v := strings.TrimSuffix(strings.TrimPrefix(dir, pre), post)
	var out []int
	for _, s := range strings.Split(v, ".") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return out
		}
		out = append(out, n)
	}
	return out
}

// Run implements Workload.
func (w Pgbench) Run(ctx context.Context, env Env) (*Result, error) {
	run, err := newPgbenchRun(env)
	if err != nil {
		return nil, err
	}
	if ps, ok := env.Server.(testbed.PodSite); ok {
		return run.inPods(ctx, env, ps)
	}
	progs, err := findPostgres()
	if err != nil {
		return nil, err
	}

	srv, err := startPostgres(ctx, env, progs, run)
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	defer srv.close()
	// Initialised in the server site through the unix socket, so that
	// loading the tables costs the same on every datapath and the datapath
	// carries only the measured run.
	if _, err := runToolClient(ctx, env.Server, testbed.Command{Name: "pgbench-init", Path: progs.pgbench,
		Args: run.initArgs(srv.dir, env.Port), Env: pgbenchEnv}, run.initLimit()); err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	logDir := filepath.Join(srv.dir, "log")
	if err := os.Mkdir(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	secs, args := run.clientArgs(env, filepath.Join(logDir, "tx"))
	// The cluster is made, started and loaded: the measured window is
	// pgbench's, a warmup after it starts (its first transaction begins
	// after it connects: the window starts that much early).
	env.measure(env.Warmup, env.Duration)
	srvCPU := watchCPU(srv.proc, env.Warmup, env.Duration)
	defer srvCPU.stop()
	out, runErr := runToolClient(ctx, env.Client, testbed.Command{Name: "pgbench", Path: progs.pgbench, Args: args, Env: pgbenchEnv},
		time.Duration(secs)*time.Second+30*time.Second)
	if runErr != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("pgbench: %w", runErr)
	}
	log, err := readPgbenchLogs(logDir)
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	res, err := ParsePgbench(out, log, PgbenchWindow{Warmup: env.Warmup, Duration: env.Duration, Rate: run.rate})
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("pgbench: %w", runErr)
		}
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	if s, ok := srvCPU.seconds(); ok {
		res.Metrics[results.CPUSecondsServer] = s
	}
	return res, nil
}

// pgbenchRun is a trial's parameters.
type pgbenchRun struct {
	clients, jobs, scale int64
	rate                 float64
	// script is pgbench's built-in script (-b).
	script string
	// queryMode is pgbench's -M: simple, extended or prepared.
	queryMode string
}

func newPgbenchRun(env Env) (*pgbenchRun, error) {
	r := &pgbenchRun{clients: intParam(env.Params, "clients", 4), scale: intParam(env.Params, "scale", 1), rate: floatParam(env.Params, "rate", 0),
		queryMode: stringParam(env.Params, "query_mode", "simple")}
	r.jobs = min(intParam(env.Params, "jobs", 2), r.clients)
	var ok bool
	if r.script, ok = map[string]string{"select-only": "select-only", "tpcb": "tpcb-like"}[stringParam(env.Params, "mode", "select-only")]; !ok {
		return nil, fmt.Errorf("pgbench: mode %q (want select-only or tpcb)", env.Params["mode"])
	}
	switch r.queryMode {
	case "simple", "extended", "prepared":
	default:
		return nil, fmt.Errorf("pgbench: query_mode %q (want simple, extended or prepared)", r.queryMode)
	}
	return r, nil
}

// maxConns is the server's max_connections.
func (r *pgbenchRun) maxConns() int { return max(100, int(r.clients)+10) }

// initArgs are pgbench -i's arguments, through the unix socket in dir.
func (r *pgbenchRun) initArgs(dir string, port int) []string {
	return []string{"-i", "-q", "-s", strconv.FormatInt(r.scale, 10), "-h", dir, "-p", strconv.Itoa(port), "-U", postgresRole, postgresRole}
}

// initLimit bounds pgbench -i.
func (r *pgbenchRun) initLimit() time.Duration {
	return time.Minute + time.Duration(r.scale)*5*time.Second
}

// clientArgs are the measured pgbench's arguments, logging to files
// named logPrefix.*, and the seconds it runs: the warmup plus the
// duration, rounded up with at least half a second to spare.
func (r *pgbenchRun) clientArgs(env Env, logPrefix string) (secs int, args []string) {
	secs = wholeSeconds(env.Warmup+env.Duration+500*time.Millisecond, 1)
	// -n: no vacuum before the run, the tables are fresh. Latency comes
	// from the log, and with --rate pgbench logs it from each transaction's
	// scheduled start, so it is corrected for coordinated omission.
	args = []string{"-n", "-h", env.Target.Host, "-p", strconv.Itoa(env.Target.Port),
		"-U", postgresRole, "-b", r.script, "-M", r.queryMode, "-c", strconv.FormatInt(r.clients, 10), "-j", strconv.FormatInt(r.jobs, 10),
		"-T", strconv.Itoa(secs), "-l", "--log-prefix=" + logPrefix}
	if r.rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(r.rate, 'f', -1, 64))
	}
	return secs, append(args, postgresRole)
}

// postgresArgs are postgres's arguments: the benchmark's settings (see
// startPostgres), its unix socket in dir.
func (r *pgbenchRun) postgresArgs(data, dir string, port int) []string {
	args := []string{"-D", data, "-p", strconv.Itoa(port)}
	for _, kv := range []string{"listen_addresses=*", "unix_socket_directories=" + dir,
		"max_connections=" + strconv.Itoa(r.maxConns()), "fsync=off", "synchronous_commit=off", "full_page_writes=off",
		"dynamic_shared_memory_type=mmap"} {
		args = append(args, "-c", kv)
	}
	return args
}

// initdbArgs are initdb's arguments.
func initdbArgs(data string) []string {
	return []string{"-D", data, "-U", postgresRole, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"}
}

// pgHBA trusts every connection: the sites' networks are the run's own.
const pgHBA = "local all all trust\nhost all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n"

// pgbenchEnv is added to pgbench's environment: no SSL or GSSAPI
// negotiation (the server offers neither; asking costs a round trip per
// connection), and a bounded connect.
var pgbenchEnv = []string{"PGSSLMODE=disable", "PGGSSENCMODE=disable", "PGCONNECT_TIMEOUT=10"}

// readPgbenchLogs returns pgbench's per-transaction logs in dir (one per
// thread) concatenated.
func readPgbenchLogs(dir string) ([]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var all []byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		all = append(all, b...)
	}
	return all, nil
}

// postgresServer is a PostgreSQL server running in a site from a
// throwaway directory that holds its data (data/), its unix socket and
// pgbench's logs.
type postgresServer struct {
	proc testbed.Process
	dir  string
}

// startPostgres makes a database cluster with initdb, in a temp dir made
// by env, and starts postgres in env.Server on env.Port, on every address, with at most run.maxConns() connections, and waits
// until it accepts connections. On error nothing is left behind.
//
// The cluster is a benchmark's: trust authentication for every address
// (the sites' networks are the run's own), and fsync, synchronous_commit
// and full_page_writes off. The data are thrown away at the end, and with
// them on, tpcb's commits would wait for the host's disk, which would
// swamp and vary with what the datapath adds; select-only writes nothing
// either way. Dynamic shared memory lives in the data directory (mmap),
// so a killed server leaves nothing in /dev/shm.
func startPostgres(ctx context.Context, env Env, progs *postgresProgs, run *pgbenchRun) (_ *postgresServer, err error) {
	site, port := env.Server, env.Port
	dir, err := env.mkdirTemp("pgbench")
	if err != nil {
		return nil, err
	}
	s := &postgresServer{dir: dir}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if progs.asUser != nil {
		if err := os.Chown(dir, progs.uid, progs.gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := func(name, prog string, args ...string) testbed.Command {
		argv := append(slices.Clone(progs.asUser), prog)
		argv = append(argv, args...)
		return testbed.Command{Name: name, Path: argv[0], Args: argv[1:], Env: []string{"LC_ALL=C"}}
	}
	if _, err := runToolClient(ctx, site, cmd("initdb", progs.initdb, initdbArgs(data)...), time.Minute); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(pgHBA), 0o600); err != nil {
		return nil, err
	}
	if progs.asUser != nil {
		if err := os.Chown(filepath.Join(data, "pg_hba.conf"), progs.uid, progs.gid); err != nil {
			return nil, err
		}
	}
	if s.proc, err = startToolServer(ctx, site, cmd("postgres", progs.postgres, run.postgresArgs(data, dir, port)...), port); err != nil {
		return nil, err
	}
	return s, waitPostgresReady(ctx, s.proc, func() ([]byte, error) { return os.ReadFile(filepath.Join(data, "postmaster.pid")) }, 30*time.Second)
}

// waitPostgresReady waits until the status line of postmaster.pid (read
// by pidFile) reads "ready" (postgres listens before it has finished
// starting up, and refuses connections until then), p exits, ctx ends or
// limit passes.
func waitPostgresReady(ctx context.Context, p testbed.Process, pidFile func() ([]byte, error), limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if b, err := pidFile(); err == nil {
			if lines := strings.Split(string(b), "\n"); len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-p.Done():
			return fmt.Errorf("postgres exited while starting: %v: %s", p.Wait(), p.Tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %s", limit, p.Tail())
		}
	}
}

// close stops postgres and removes its directory. It asks the postmaster
// for a fast shutdown (SIGINT: sessions are ended, then a shutdown
// checkpoint, and the shared memory is released) rather than Process.Stop's
// SIGTERM to the whole group: a smart shutdown, which waits for clients,
// with the helpers signalled out of turn. What is left after 10 s is killed.
func (s *postgresServer) close() error {
	var err error
	if s.proc != nil {
		select {
		case <-s.proc.Done():
		default:
			if pid, local := testbed.PIDOf(s.proc); !local {
				_ = s.proc.Stop(5 * time.Second)
			} else if p, ferr := os.FindProcess(pid); ferr == nil {
				_ = p.Signal(os.Interrupt)
			}
			select {
			case <-s.proc.Done():
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("postgres: no fast shutdown within 10s: %s", s.proc.Tail())
			}
		}
		s.proc.Stop(time.Second)
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// PgbenchWindow says which transactions of a pgbench run ParsePgbench
// counts.
type PgbenchWindow struct {
	// Warmup is the time after the first transaction began that is not
	// counted; Duration is the measured time after it.
	Warmup, Duration time.Duration
	// Rate is the run's --rate in transactions/s; 0 when it ran flat out.
	Rate float64
}

var (
	pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	pgbenchAborted   = regexp.MustCompile(`(?m)aborted in command|^pgbench: error: Run was aborted`)
)

// ParsePgbench reads the output (stdout and stderr) of a pgbench run and
// its per-transaction log (pgbench -l, every thread's file concatenated;
// lines of client, transaction, latency µs or "failed", script, end time
// in s and µs, and with --rate the schedule lag µs). The window begins
// w.Warmup after the earliest transaction start in the log and lasts
// w.Duration, or less if the log ends first (duration_s says which).
// Transactions that ended in the window give transactions_per_s, the
// latency metrics and histogram (pgbench's latency, which with --rate
// runs from the scheduled start) and errors (failed transactions); with
// w.Rate, also target_rate, sustained (as every paced workload reports it:
// transactions_per_s against target_rate), offered_per_s and the schedule
// lag. Output that
// says pgbench could not run, or that a client aborted (its results are
// then incomplete), is an error quoting pgbench's error lines.
func ParsePgbench(out, log []byte, w PgbenchWindow) (*Result, error) {
	text := string(out)
	if pgbenchAborted.MatchString(text) {
		return nil, fmt.Errorf("%w: run aborted: %s", errToolReported, pgbenchErrors(text))
	}
	if pgbenchProcessed.FindStringSubmatch(text) == nil {
		if e := pgbenchErrors(text); e != "" {
			return nil, fmt.Errorf("%w: %s", errToolReported, e)
		}
		return nil, fmt.Errorf("no summary in output %q", truncate(firstLines(text, 3), 300))
	}
	// Two passes, the first for the window: a long flat-out run logs
	// millions of transactions, not worth holding twice.
	t0, last := int64(-1), int64(-1)
	err := eachPgbenchTx(log, w.Rate > 0, func(t pgbenchTx) error {
		if start := t.end - t.lat; t.lat >= 0 && (t0 < 0 || start < t0) {
			t0 = start
		}
		last = max(last, t.end)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t0 < 0 {
		return nil, errors.New("no completed transaction in the transaction log")
	}
	from := t0 + w.Warmup.Microseconds()
	to := min(from+w.Duration.Microseconds(), last)
	if to <= from {
		return nil, fmt.Errorf("run ended %.3f s after its first transaction began, within the warmup", float64(last-t0)/1e6)
	}
	h, lag := newLatencyHist(), newLatencyHist()
	var failed, offered float64
	err = eachPgbenchTx(log, w.Rate > 0, func(t pgbenchTx) error {
		// A failed transaction's log line has no latency: its end stands
		// in for its scheduled start.
		if start := t.end - max(t.lat, 0); start >= from && start < to {
			offered++
		}
		if t.end < from || t.end >= to {
			return nil
		}
		if t.lat < 0 {
			failed++
			return nil
		}
		if err := h.RecordValue(max(t.lat, 1) * 1000); err != nil {
			return fmt.Errorf("transaction log: %w", err)
		}
		if w.Rate > 0 {
			if err := lag.RecordValue(max(t.lag, 1) * 1000); err != nil {
				return fmt.Errorf("transaction log: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if h.TotalCount() == 0 {
		return nil, fmt.Errorf("no transaction completed in the window (%d failed)", int(failed))
	}
	secs := float64(to-from) / 1e6
	m, enc, err := histogramMetrics(h)
	if err != nil {
		return nil, err
	}
	m[results.TransactionsPerS] = float64(h.TotalCount()) / secs
	m[results.DurationS] = secs
	m[MetricErrors] = failed
	if w.Rate > 0 {
		m[results.TargetRate] = w.Rate
		m[results.Sustained] = 0
		if m[results.TransactionsPerS] >= results.SustainedFraction*w.Rate {
			m[results.Sustained] = 1
		}
		m[MetricOfferedPerS] = offered / secs
		m[MetricScheduleLagP50] = float64(lag.ValueAtQuantile(50)) / 1e9
		m[MetricScheduleLagP99] = float64(lag.ValueAtQuantile(99)) / 1e9
	}
	return &Result{Metrics: m, Histogram: enc, Missing: results.DropThinTails(m, nil)}, nil
}

// pgbenchTx is a line of pgbench's transaction log, times in µs.
type pgbenchTx struct {
	// end is when the transaction ended, since the epoch.
	end int64
	// lat is its latency; -1 when it failed.
	lat int64
	// lag is its schedule lag, in a paced run.
	lag int64
}

// eachPgbenchTx calls f with each transaction of log, stopping at f's
// first error. paced says the lines carry the schedule lag.
func eachPgbenchTx(log []byte, paced bool, f func(pgbenchTx) error) error {
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 {
			continue
		}
		sec, err1 := strconv.ParseInt(fs[4], 10, 64)
		us, err2 := strconv.ParseInt(fs[5], 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("transaction log line %q: bad end time", sc.Text())
		}
		t := pgbenchTx{end: sec*1e6 + us, lat: -1}
		// Anything but a number in the latency field ("failed",
		// "serialization", "deadlock", "skipped") is a failed transaction.
		if lat, err := strconv.ParseInt(fs[2], 10, 64); err == nil {
			t.lat = lat
			if paced && len(fs) > 6 {
				t.lag, _ = strconv.ParseInt(fs[6], 10, 64)
			}
		}
		if err := f(t); err != nil {
			return err
		}
	}
	return sc.Err()
}

// pgbenchErrors returns pgbench's first two error lines ("pgbench: error:
// ..."), joined; "" when it printed none.
func pgbenchErrors(text string) string {
	var errs []string
	for _, l := range strings.Split(text, "\n") {
		if e, ok := strings.CutPrefix(l, "pgbench: error: "); ok && len(errs) < 2 {
			errs = append(errs, strings.TrimSpace(e))
		}
	}
	return truncate(strings.Join(errs, "; "), 300)
}
