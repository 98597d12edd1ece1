package cli_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/workload"
)

// TestMessagingKillThenClean kills `spanperf run` (SIGKILL) mid-way through
// a messaging trial through RabbitMQ: beam outlives Debian's server
// script, whose parent-death signal it does not inherit. clean, scoped to
// the run, leaves nothing: no namespace, ledger, temp dir, agent, epmd or
// process of the user rabbitmq still running.
func TestMessagingKillThenClean(t *testing.T) {
	requireRoot(t)
	if err := workload.CheckBroker(workload.BrokerRabbitMQ); err != nil {
		t.Skip(err)
	}
	cmd, e := startScenario(t, "name: killmessaging\ndatapaths: [native]\nworkloads:\n  - type: messaging\n    broker: rabbitmq\n    rate: 100\nduration: 30s\nwarmup: 1s\n")
	var run string
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no messaging client of testbed %q after 120 s:\n%s", run, e.String())
		}
		_, run = ledgersOf(cmd.Process.Pid)
		if run != "" && len(processesWith("agent messaging --protocol")) > 0 {
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out, errOut, code := spanperf(t, "clean", "--run", run)
	if code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	if r := residueOf(t, run); len(r) > 0 {
		t.Errorf("left behind after SIGKILL and clean: %v\nclean said:\n%s", r, out)
	}
	var left []string
	for range 20 {
		left = append(processesWith("epmd -address 127.0.0.1"), rabbitmqRunning()...)
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("broker processes left after clean: %v\nclean said:\n%s", left, out)
	}
}

// TestMessagingBrokerPerGroup: the trials of one (repetition, datapath)
// group share one broker, started by the first: every record of a group
// has the same broker_start_s, and a repetition (a new group) starts
// another; the broker the first (amqp10) trial started with its plugin
// serves the amqp091 trials after it. Neither amqp10's durable request
// queue nor a durable amqp091 trial's clashes with the non-durable one
// after it, and the run leaves no broker behind.
func TestMessagingBrokerPerGroup(t *testing.T) {
	requireRoot(t)
	if err := workload.CheckBroker(workload.BrokerRabbitMQ); err != nil {
		t.Skip(err)
	}
	recs, _ := runWAN(t, `name: broker-per-group
datapaths: [native]
workloads:
  - type: messaging
    protocol: amqp10
    rate: 100
  - type: messaging
    rate: 100
  - type: messaging
    rate: 200
    durable: true
  - type: messaging
    rate: 150
repetitions: 2
duration: 500ms
warmup: 200ms
`)
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8 (4 trials × 2 repetitions)", len(recs))
	}
	starts := map[int]map[float64]bool{}
	for _, r := range recs {
		if r.Metrics[workload.MetricMessagesPerS] <= 0 {
			t.Errorf("trial %d %v: no messages: %v", r.Trial, r.Params, r.Metrics)
		}
		if starts[r.Rep] == nil {
			starts[r.Rep] = map[float64]bool{}
		}
		starts[r.Rep][r.Metrics[workload.MetricBrokerStartS]] = true
	}
	if len(starts) != 2 || len(starts[0]) != 1 || len(starts[1]) != 1 {
		t.Fatalf("broker_start_s by repetition %v: want one broker per repetition", starts)
	}
	for s0 := range starts[0] {
		if starts[1][s0] {
			t.Errorf("both repetitions report broker_start_s %v: one broker for both groups?", s0)
		}
	}
	if left := rabbitmqRunning(); len(left) > 0 {
		t.Errorf("broker processes left: %v", left)
	}
}

// rabbitmqRunning lists the PIDs of the user rabbitmq's processes that
// are not zombies (PID 1 reaps late here).
func rabbitmqRunning() []string {
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return nil
	}
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		st, _ := os.ReadFile(filepath.Join(p, "status"))
		if strings.Contains(string(st), "\nState:\tZ") {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == u.Uid {
				out = append(out, filepath.Base(p))
			}
		}
	}
	return out
}
