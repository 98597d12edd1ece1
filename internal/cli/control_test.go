package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath"
	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/testbed"
)

// TestDiscoveryKnownAnswer: a custom datapath whose expose command takes a
// known 200 ms (it sleeps, then returns) reads discovery_s 200 ms to
// 230 ms: never less than the injected delay, and above it by starting sh
// and the probe's first connection (the server, started beside the
// exposure, is ready well before). Checkpoints come in order.
func TestDiscoveryKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: discovery-known
datapaths:
  - name: custom
    label: slow-expose
    up: "exec sleep 1d"
    expose: "sleep 0.2"
workloads:
  - type: discovery
repetitions: 5
`)
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	for _, r := range recs {
		logCheckpoints(t, r)
		checkpointsInOrder(t, r)
	}
	d := medianOf(t, recs, "interval", "1ms", results.DiscoverySeconds)
	if d < 0.200 || d > 0.230 {
		t.Errorf("discovery_s median %.1f ms, want 200 to 230 ms (expose sleeps 200 ms)", d*1e3)
	}
}

// logCheckpoints logs a discovery record's checkpoints.
func logCheckpoints(t *testing.T, r results.Record) {
	t.Helper()
	m := r.Metrics
	t.Logf("%-12s ready %7.1f ms  routed %7.1f ms  connect %7.1f ms  response %7.1f ms  discovery %7.1f ms  attempts %v",
		r.Datapath, m[results.ProcessReadySeconds]*1e3, m[results.RouteInstalledSeconds]*1e3, m[results.FirstConnectSeconds]*1e3,
		m[results.FirstResponseSeconds]*1e3, m[results.DiscoverySeconds]*1e3, m[results.ProbeAttempts])
}

// checkpointsInOrder: the route is installed before the first connection,
// which comes before the first response, which is the discovery time;
// the server was ready before that response.
func checkpointsInOrder(t *testing.T, r results.Record) {
	t.Helper()
	m := r.Metrics
	route, conn, resp, d, ready := m[results.RouteInstalledSeconds], m[results.FirstConnectSeconds], m[results.FirstResponseSeconds], m[results.DiscoverySeconds], m[results.ProcessReadySeconds]
	if !(route > 0 && route <= conn && conn <= resp && resp == d && ready > 0 && ready <= resp) {
		t.Errorf("%s: checkpoints out of order: ready %v route %v connect %v response %v discovery %v", r.Datapath, ready, route, conn, resp, d)
	}
	if m[results.ProbeAttempts] < 1 {
		t.Errorf("%s: %v probe attempts", r.Datapath, m[results.ProbeAttempts])
	}
}

// TestFailoverKnownAnswer: a custom datapath whose relay in the client's
// site switches to the backup server a known 300 ms after its first failed
// dial of the preferred one reads outage_s 300 ms ± 30 ms (the median of
// 5), with failed transactions counted and the backup answering after.
// Above 300 ms are the time the killed server's socket takes to close
// (the relay's first failed dial starts its timer) and the last answer's
// distance from the kill.
func TestFailoverKnownAnswer(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, fmt.Sprintf(`name: failover-known
sites: 3
datapaths:
  - name: custom
    label: switch-300ms
    up: "exec sleep 1d"
    failover: "exec %s agent relay --listen {site_addr}:17300 --to {peer_addr}:{port} --backup {backup_addr}:{port} --switch-after 300ms"
    failover_target: "{site_addr}:17300"
workloads:
  - type: failover
    run_for: 2s
    fail_after: 500ms
repetitions: 5
`, bin))
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	for _, r := range recs {
		m := r.Metrics
		t.Logf("outage %.1f ms  recovery %.1f ms  failed %v  answered by b %v, c %v", m[results.OutageSeconds]*1e3, m[results.RecoverySeconds]*1e3,
			m[results.FailedTransactions], m[results.AnsweredBy+"{b}"], m[results.AnsweredBy+"{c}"])
		if m[results.FailedTransactions] < 50 || m[results.AnsweredBy+"{b}"] < 1 || m[results.AnsweredBy+"{c}"] < 1 {
			t.Errorf("failed %v, answered by b %v, c %v: want failures, and answers from both", m[results.FailedTransactions], m[results.AnsweredBy+"{b}"], m[results.AnsweredBy+"{c}"])
		}
	}
	if o := medianOf(t, recs, "fail", "server", results.OutageSeconds); o < 0.270 || o > 0.330 {
		t.Errorf("outage_s median %.1f ms, want 300 ± 30 ms", o*1e3)
	}
}

// TestDiscoveryRealDatapaths: a server started after setup and exposed
// through native (a new address and the wan router's route to it), vxlan
// (a route into the tunnel), ipsec (a child SA per pair), mesh-gateway (a
// proxy, outbound listeners and a route in the gateway),
// wireguard (a new address in the peers' allowed IPs) and mtls-relay (new
// relay listeners and routes) carries its first transaction, with the
// checkpoints in order; nothing is left behind.
func TestDiscoveryRealDatapaths(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: discovery-real
datapaths: [native, vxlan, wireguard, ipsec, mtls-relay, mesh-gateway]
workloads:
  - type: discovery
repetitions: 2
`)
	if len(recs) != 12 {
		t.Fatalf("%d records, want 12", len(recs))
	}
	for _, r := range recs {
		logCheckpoints(t, r)
		checkpointsInOrder(t, r)
	}
}

// TestDiscoveryWireGuardHub: in the hub, a service exposed in spoke c is
// reached from spoke b through the hub: b adds its address to its one
// peer, the hub, which forwards it to c.
func TestDiscoveryWireGuardHub(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: discovery-hub
sites: 3
topology: hub
datapaths: [wireguard]
workloads:
  - type: discovery
    client_site: b
    server_site: c
repetitions: 2
`)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Fatalf("trial failed: %s", r.Error)
		}
		logCheckpoints(t, r)
		checkpointsInOrder(t, r)
	}
}

// TestFailoverMTLSRelay: the server in two sites, the client in the
// first; mtls-relay's client-site relay (and mesh-gateway's client-site
// sidecar, through each server site's gateway) routes to b, with c as
// backup, health-checking both end to end. Killing b's server mid-run
// moves the traffic to c: the outage is finite and within the health
// checks' configured detection time (datapath.RelayCheckDetect, 300 ms)
// plus 200 ms for a check's own TLS handshake, the last answer's distance
// from the kill and a loaded machine (the median of 5 trials: at load
// averages above 25 single trials stalled for a second); the transactions
// sent to b meanwhile failed and are counted. Nothing is left behind.
func TestFailoverMTLSRelay(t *testing.T) {
	requireRoot(t)
	for _, dp := range []string{"mtls-relay", "mesh-gateway"} {
		t.Run(dp, func(t *testing.T) {
			recs, _ := runWAN(t, `name: failover-haproxy
sites: 3
datapaths: [`+dp+`]
workloads:
  - type: failover
    run_for: 2s
    fail_after: 500ms
repetitions: 5
`)
			if len(recs) != 5 {
				t.Fatalf("%d records, want 5", len(recs))
			}
			if ps := processesWith("/" + dp + "/expose-"); len(ps) > 0 {
				t.Errorf("exposure proxies left after the run: %v", ps)
			}
			checkFailover(t, recs, "server", 0, datapath.RelayCheckDetect+200*time.Millisecond)
		})
	}
}

// checkFailover logs each failover record and checks that the median
// outage of those with fail is above lo and at most hi, that every trial
// counted failed transactions and answers from c, and that the outage is
// finite in each.
func checkFailover(t *testing.T, recs []results.Record, fail string, lo, hi time.Duration) {
	t.Helper()
	for _, r := range recs {
		m := r.Metrics
		t.Logf("outage %.1f ms  recovery %.1f ms  failed %v  answered by b %v, c %v", m[results.OutageSeconds]*1e3, m[results.RecoverySeconds]*1e3,
			m[results.FailedTransactions], m[results.AnsweredBy+"{b}"], m[results.AnsweredBy+"{c}"])
		if o := m[results.OutageSeconds]; o <= 0 || o > 5 {
			t.Errorf("outage_s %v, want finite and > 0", o)
		}
		if m[results.FailedTransactions] < 1 || m[results.AnsweredBy+"{b}"] < 1 || m[results.AnsweredBy+"{c}"] < 1 {
			t.Errorf("failed %v, answered by b %v, c %v: want failures, and answers from both", m[results.FailedTransactions], m[results.AnsweredBy+"{b}"], m[results.AnsweredBy+"{c}"])
		}
	}
	if o := medianOf(t, recs, "fail", fail, results.OutageSeconds); o <= lo.Seconds() || o > hi.Seconds() {
		t.Errorf("outage_s median %.1f ms, want above %v and at most %v", o*1e3, lo, hi)
	}
}

// TestFailoverKillThenClean kills `spanperf run` (SIGKILL) mid-way through
// a failover trial through mtls-relay: its servers, probe and exposure
// relays run. clean, scoped to the run, leaves nothing: no namespace,
// ledger, temp dir, agent or haproxy of the run.
func TestFailoverKillThenClean(t *testing.T) {
	requireRoot(t)
	cmd, e := startScenario(t, "name: killfailover\nsites: 3\ndatapaths: [mtls-relay]\nworkloads:\n  - type: failover\n    run_for: 20s\n    fail_after: 10s\nrepetitions: 2\n")
	var run string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no failover probe of testbed %q after 60 s:\n%s", run, e.String())
		}
		_, run = ledgersOf(cmd.Process.Pid)
		if run != "" && len(processesWith("agent failover")) > 0 && len(processesWith("expose-")) > 0 {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // traffic flowing through the exposure
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out, errOut, code := spanperf(t, "clean", "--run", run)
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	if r := residueOf(t, run); len(r) > 0 {
		t.Errorf("left behind after SIGKILL and clean: %v\nclean said:\n%s", r, out)
	}
	if ps := processesWith("spanperf-" + run); len(ps) > 0 {
		t.Errorf("processes of run %s left after clean: %v", run, ps)
	}
}

// processesWith lists, as "PID command line", the processes (other than
// the test's own) whose command line contains s.
func processesWith(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if cmdline := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")); strings.Contains(cmdline, s) {
			out = append(out, e.Name()+" "+cmdline)
		}
	}
	return out
}

// startScenario starts `spanperf run` of scenario src through the binary, as a
// user does, with its stderr in the returned buffer; the run is killed
// when the test ends.
func startScenario(t *testing.T, src string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-f", p, "--out", filepath.Join(t.TempDir(), "run"))
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &e
}

// ledgersOf lists the ledgers whose owner is process pid (a run's
// testbeds), with the testbed ID of the last one ("" without any).
func ledgersOf(pid int) (files []string, run string) {
	all, _ := filepath.Glob(filepath.Join(testbed.LedgerDir, "*.ledger"))
	for _, l := range all {
		if ents, err := testbed.ReadLedger(l); err == nil && len(ents) > 0 && ents[0].Owner == pid {
			files, run = append(files, l), ents[0].Run
		}
	}
	return files, run
}

// TestFailoverMTLSRelayGateway: as TestFailoverMTLSRelay, but b's site is
// cut off the underlay (its gateway dies) instead of its server: nothing
// answers, so each health check fails when its connection times out
// (RelayCheckInter), and the outage lies between RelayCheckFall checks'
// worth (less 100 ms: the check under way at the cut) and
// datapath.RelayCheckDetectSilent plus 300 ms (the median of 5 trials).
// The cut is lifted after the trial: nothing left behind.
func TestFailoverMTLSRelayGateway(t *testing.T) {
	requireRoot(t)
	recs, _ := runWAN(t, `name: failover-mtls-gw
sites: 3
datapaths: [mtls-relay]
workloads:
  - type: failover
    fail: gateway
    run_for: 4s
    fail_after: 1s
repetitions: 5
`)
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	lo := datapath.RelayCheckFall*datapath.RelayCheckInter + datapath.RelayCheckFastInter - 100*time.Millisecond
	checkFailover(t, recs, "gateway", lo, datapath.RelayCheckDetectSilent+300*time.Millisecond)
}
