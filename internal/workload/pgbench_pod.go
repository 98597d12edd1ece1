package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// inPods runs the trial on pod sites: PostgreSQL (initdb, then postgres,
// as the server image's user postgres) in the server pod's server
// container, pgbench -i there through the unix socket, and the measured
// pgbench in the client pod's server container (the same image). The
// files live in each container's /tmp (the pod's emptyDir), written and
// read back through the agent, and are removed at the end. PostgreSQL's
// CPU is its server container's cgroup's over the window.
func (r *pgbenchRun) inPods(ctx context.Context, env Env, srv testbed.PodSite) (_ *Result, err error) {
	cli, ok := env.Client.(testbed.PodSite)
	if !ok {
		return nil, fmt.Errorf("pgbench: server site %s is a pod, client site %s is not", srv.Name(), env.Client.Name())
	}
	if srv.ServerImage() == "" {
		return nil, fmt.Errorf("pgbench: site %s is a pod: name an image with PostgreSQL (initdb, postgres, pgbench in its PATH and a user %s) with server_image: in the scenario (or --server-image)", srv.Name(), postgresUser)
	}
	where := func(s testbed.PodSite) string { return "image " + s.ServerImage() + " (" + s.Where(true) + ")" }
	dir := fmt.Sprintf("/tmp/spanperf-pgbench-%d", env.Port)
	data, logDir := dir+"/data", dir+"/log"
	// A trial killed before it cleaned up leaves its directory: start afresh.
	for _, s := range []testbed.PodSite{srv, cli} {
		if err := podAgent(ctx, s, "rm", dir); err != nil {
			return nil, fmt.Errorf("pgbench: %s: %w", s.Where(true), err)
		}
	}
	defer func() {
		for _, s := range []testbed.PodSite{srv, cli} {
			// The trial's own context may be over: clean up on one of ours.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if rerr := podAgent(cctx, s, "rm", dir); rerr != nil && err == nil {
				err = fmt.Errorf("pgbench: %s: %w", s.Where(true), rerr)
			}
			cancel()
		}
	}()
	// The directory belongs to postgres, which initdb and postgres run as.
	if err := writeFile(ctx, srv, dir+"/.spanperf", nil, 0o644, postgresUser); err != nil {
		return nil, fmt.Errorf("pgbench: %s: %w", where(srv), err)
	}
	if _, err := runToolClient(ctx, srv, asPostgres(dir, "initdb", initdbArgs(data)...), time.Minute); err != nil {
		return nil, fmt.Errorf("pgbench: initdb in %s: %w", where(srv), err)
	}
	if err := writeFile(ctx, srv, data+"/pg_hba.conf", []byte(pgHBA), 0o600, postgresUser); err != nil {
		return nil, fmt.Errorf("pgbench: %s: %w", where(srv), err)
	}
	pg, err := startToolServer(ctx, srv, asPostgres(dir, "postgres", r.postgresArgs(data, dir, env.Port)...), env.Port)
	if err != nil {
		return nil, fmt.Errorf("pgbench: postgres in %s: %w", where(srv), err)
	}
	defer pg.Stop(10 * time.Second)
	pidFile := func() ([]byte, error) { return podCat(ctx, srv, data+"/postmaster.pid") }
	if err := waitPostgresReady(ctx, pg, pidFile, 30*time.Second); err != nil {
		return nil, fmt.Errorf("pgbench: postgres in %s: %w", where(srv), err)
	}
	if _, err := runToolClient(ctx, srv, testbed.Command{Name: "pgbench-init", Path: "pgbench", Server: true,
		Args: r.initArgs(dir, env.Port), Env: pgbenchEnv}, r.initLimit()); err != nil {
		return nil, fmt.Errorf("pgbench: pgbench -i in %s: %w", where(srv), err)
	}
	if err := writeFile(ctx, cli, logDir+"/.spanperf", nil, 0o644, ""); err != nil {
		return nil, fmt.Errorf("pgbench: %s: %w", where(cli), err)
	}
	secs, args := r.clientArgs(env, logDir+"/tx")
	env.measure(env.Warmup, env.Duration)
	// PostgreSQL's CPU: its server container's cgroup, which holds only
	// postgres by now.
	srvCPU := watchCPU(podServer{Process: pg, site: srv}, env.Warmup, env.Duration)
	defer srvCPU.stop()
	out, runErr := runToolClient(ctx, cli, testbed.Command{Name: "pgbench", Path: "pgbench", Server: true, Args: args, Env: pgbenchEnv},
		time.Duration(secs)*time.Second+30*time.Second)
	if runErr != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("pgbench: %w", runErr)
	}
	log, err := podCat(ctx, cli, logDir)
	if err != nil {
		return nil, fmt.Errorf("pgbench: %s: %w", where(cli), err)
	}
	res, err := ParsePgbench(out, log, PgbenchWindow{Warmup: env.Warmup, Duration: env.Duration, Rate: r.rate})
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("pgbench in %s: %w", where(cli), runErr)
		}
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	if s, ok := srvCPU.seconds(); ok {
		res.Metrics[results.CPUSecondsServer] = s
	}
	return res, nil
}

// asPostgres is prog with args run as the user postgres in a pod's
// server container: `agent run` (the copy there) becomes the user and
// execs prog from the image's PATH, in the place of the process the
// site started (one PID throughout, so the site's Stop reaches prog).
func asPostgres(dir, prog string, args ...string) testbed.Command {
	cmd := agent.Command(prog, append([]string{"run", "--pidfile", dir + "/" + prog + ".pid", "--user", postgresUser,
		"--prog", prog, "--env", "LC_ALL=C", "--"}, args...)...)
	cmd.Server = true
	return cmd
}

// podAgent runs `agent ARGS...` in site's server container to its end.
func podAgent(ctx context.Context, site testbed.Site, args ...string) error {
	_, err := podAgentOutput(ctx, site, args...)
	return err
}

// podCat returns the file at path in site's server container (a
// directory: its files, concatenated in name order).
func podCat(ctx context.Context, site testbed.Site, path string) ([]byte, error) {
	return podAgentOutput(ctx, site, "cat", path)
}

func podAgentOutput(ctx context.Context, site testbed.Site, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := agent.Command("agent-"+args[0], args...)
	cmd.Server, cmd.Stdout = true, &out
	p, err := site.Exec(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := waitProcess(ctx, p, time.Minute); err != nil {
		return nil, fmt.Errorf("agent %s: %w", args[0], err)
	}
	return out.Bytes(), nil
}
