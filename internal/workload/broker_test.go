package workload_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spanperf/spanperf/internal/datapath/datapathtest"
	"github.com/spanperf/spanperf/internal/testbed/netns"
	"github.com/spanperf/spanperf/internal/workload"
)

// requireBroker skips t when the broker kind is not installed.
func requireBroker(t *testing.T, kind string) {
	t.Helper()
	datapathtest.RequireRoot(t)
	if err := workload.CheckBroker(kind); err != nil {
		t.Skip(err)
	}
}

// brokerLeftovers lists processes still running from a broker directory
// under dir, and any epmd or beam in the testbed's namespaces (read from
// /proc: cmdline and cwd).
func brokerLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	// erl_child_setup exits once beam has: give it a moment.
	for range 20 {
		if len(brokerLeftoversNow(dir)) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return brokerLeftoversNow(dir)
}

func brokerLeftoversNow(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	for _, p := range procs {
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cl := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.Contains(cl, dir) {
			out = append(out, "process "+filepath.Base(p)+" ("+strings.TrimSpace(cl)+")")
		}
		// epmd -address 127.0.0.1 is only ours: Debian's epmd has none.
		if strings.HasPrefix(cl, "epmd -address 127.0.0.1") && filepath.Base(p) != "self" {
			if ppid := parentOf(p); ppid == self || ppid == 1 {
				out = append(out, "epmd "+filepath.Base(p))
			}
		}
	}
	// Every process of the user rabbitmq: beam, erl_child_setup and
	// inet_gethost leave the script's process group; none may outlive it.
	if u, err := user.Lookup("rabbitmq"); err == nil {
		for _, p := range procs {
			st, _ := os.ReadFile(filepath.Join(p, "status"))
			if strings.Contains(string(st), "\nState:\tZ") {
				continue // exited, not yet reaped by PID 1
			}
			for _, l := range strings.Split(string(st), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == u.Uid {
					out = append(out, "rabbitmq process "+filepath.Base(p))
				}
			}
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		out = append(out, "file "+filepath.Join(dir, e.Name()))
	}
	return out
}

// parentOf returns the parent PID of /proc/PID.
func parentOf(p string) int {
	b, _ := os.ReadFile(filepath.Join(p, "stat"))
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			var n int
			for _, c := range f[1] {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// brokerDir makes the parent of the test's broker directories and returns
// a MkdirTemp making them in it.
func brokerDir(t *testing.T) (string, func(string) (string, error)) {
	// Not t.TempDir: its parent is private, and the rabbitmq user must
	// reach its directory.
	dir, err := os.MkdirTemp("", "spanperf-brokertest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, func(kind string) (string, error) { return os.MkdirTemp(dir, "spanperf-"+kind+"-") }
}

// TestBrokerStartStop starts each broker for real in a site namespace,
// reports its start time and idle RSS, stops it and finds nothing left.
func TestBrokerStartStop(t *testing.T) {
	for _, kind := range []string{workload.BrokerNATS, workload.BrokerRabbitMQ} {
		t.Run(kind, func(t *testing.T) {
			requireBroker(t, kind)
			tb := datapathtest.Testbed(t, netns.Spec{})
			dir, mk := brokerDir(t)
			b, err := workload.StartBroker(t.Context(), tb.Sites()[1], workload.BrokerSpec{Kind: kind, Port: 5672, MkdirTemp: mk})
			if err != nil {
				t.Fatal(err)
			}
			rss, err := b.RSSBytes()
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s started in %v, idle RSS %.1f MiB", kind, b.StartTime, rss/(1<<20))
			if err := b.Close(); err != nil {
				t.Error(err)
			}
			for _, l := range brokerLeftovers(t, dir) {
				t.Errorf("left behind: %s", l)
			}
		})
	}
}

// TestBrokerStartFails: a broker that cannot start is an error quoting
// the log line that says why, and leaves nothing behind. nats-server
// with an unknown config key is cheap; RabbitMQ with a bad value of a
// known key costs a boot attempt.
func TestBrokerStartFails(t *testing.T) {
	for _, c := range []struct {
		kind, extra, want string
	}{
		{workload.BrokerNATS, "max_payload: lots\n", "nats.conf:4:1"},
		{workload.BrokerRabbitMQ, "listeners.tcp.default = notaport\n", "listeners.tcp.default"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			requireBroker(t, c.kind)
			tb := datapathtest.Testbed(t, netns.Spec{})
			dir, mk := brokerDir(t)
			b, err := workload.StartBroker(t.Context(), tb.Sites()[1], workload.BrokerSpec{Kind: c.kind, Port: 5672, MkdirTemp: mk, ExtraConfig: c.extra})
			if err == nil {
				b.Close()
				t.Fatal("started")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %q", err, c.want)
			}
			for _, l := range brokerLeftovers(t, dir) {
				t.Errorf("left behind: %s", l)
			}
		})
	}
}

// TestBrokerLogErrorGolden reads the broker logs captured in
// testdata/drivers/broker-KIND-NAME.txt (RabbitMQ 3.10 with a bad value
// of listeners.tcp.default, and with its stream port taken; nats-server
// 2.9 with a bad max_payload, a
// config syntax error, an unreadable config) and checks the line
// BrokerLogError picks against broker-KIND-NAME.golden (-update rewrites).
func TestBrokerLogErrorGolden(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join("testdata", "drivers", "broker-*.txt"))
	if len(logs) < 4 {
		t.Fatalf("%d captured broker logs, want 4", len(logs))
	}
	for _, p := range logs {
		name := strings.TrimSuffix(filepath.Base(p), ".txt")
		t.Run(name, func(t *testing.T) {
			kind, _, _ := strings.Cut(strings.TrimPrefix(name, "broker-"), "-")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, workload.BrokerLogError(kind, string(b))+"\n")
		})
	}
}

// TestCheckBrokerNamesPackage: with nats-server and epmd out of PATH, the
// check (what `spanperf doctor` prints) names the Debian packages.
func TestCheckBrokerNamesPackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for kind, want := range map[string]string{workload.BrokerNATS: "install Debian package nats-server", workload.BrokerRabbitMQ: "install Debian package erlang-base"} {
		if err := workload.CheckBroker(kind); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", kind, err, want)
		}
	}
}

// TestRabbitMQPluginsGolden reads the end of two RabbitMQ 3.10 logs
// captured with rabbitmq_amqp1_0 enabled, in
// testdata/drivers/plugins-rabbitmq-amqp10-NAME.txt: "started" (Debian's
// plugins directory) and "missing" (a plugins directory without it, as a
// broker that lacks the plugin: RabbitMQ boots without a word about it),
// and checks what RabbitMQPluginsError says against
// plugins-rabbitmq-amqp10-NAME.golden (-update rewrites): nothing, and an
// error naming the plugin and quoting the "Server startup complete" line.
func TestRabbitMQPluginsGolden(t *testing.T) {
	for _, name := range []string{"plugins-rabbitmq-amqp10-started", "plugins-rabbitmq-amqp10-missing"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "drivers", name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			got := "ok\n"
			if err := workload.RabbitMQPluginsError(string(b), []string{"rabbitmq_amqp1_0"}); err != nil {
				got = "error: " + err.Error() + "\n"
			}
			checkGolden(t, name, got, "missing")
		})
	}
}
