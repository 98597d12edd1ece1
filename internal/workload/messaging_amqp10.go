package workload

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spanperf/spanperf/internal/agent"
)

// rabbitmqAMQP10Plugin is the RabbitMQ plugin that speaks AMQP 1.0 on the
// broker's AMQP port (Debian's rabbitmq-server ships it, off by default).
const rabbitmqAMQP10Plugin = "rabbitmq_amqp1_0"

// protocolPlugins lists the RabbitMQ plugins each messaging protocol
// needs enabled.
var protocolPlugins = map[string][]string{
	agent.ProtocolAMQP10: {rabbitmqAMQP10Plugin},
}

// rabbitmqPlugins are the plugins a messaging trial's RabbitMQ starts
// with: every protocol's, whichever the trial speaks, so that one broker
// serves every trial of its group (the runner shuffles a group's points:
// a broker started for amqp091 alone would restart for the next amqp10
// trial).
func rabbitmqPlugins() []string {
	var out []string
	for _, ps := range protocolPlugins {
		for _, p := range ps {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// rabbitmqPluginLine is a line of the list RabbitMQ logs after
// rabbitmqStarted: " * NAME", after the time, level and Erlang pid.
var rabbitmqPluginLine = regexp.MustCompile(`^\S+ \S+ \[info\] <[0-9.]+>  \* (\S+)$`)

// RabbitMQPluginsError says which of plugins a RabbitMQ that has started
// (its log holds "Server startup complete; N plugins started." and the
// list that follows) did not start, quoting that line of its log; nil
// when it started them all. RabbitMQ 3.10 skips an enabled plugin it does
// not have without an error, so this is how a broker without the plugin
// shows.
func RabbitMQPluginsError(log string, plugins []string) error {
	if len(plugins) == 0 {
		return nil
	}
	lines := strings.Split(log, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, rabbitmqStarted) })
	if start < 0 {
		return fmt.Errorf("no %q in the broker's log: cannot tell whether plugins %v started", rabbitmqStarted, plugins)
	}
	var started []string
	for _, l := range lines[start+1:] {
		m := rabbitmqPluginLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			break
		}
		started = append(started, m[1])
	}
	var missing []string
	for _, p := range plugins {
		if !slices.Contains(started, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	said := strings.TrimSpace(lines[start])
	if m := rabbitmqError.FindStringSubmatch(strings.Replace(said, "[info]", "[error]", 1)); m != nil {
		said = m[1]
	}
	list := "none"
	if len(started) > 0 {
		list = strings.Join(started, ", ")
	}
	return fmt.Errorf("plugin %s not started (RabbitMQ skips an enabled plugin it cannot find): broker log: %q; started: %s",
		strings.Join(missing, ", "), said, list)
}

// waitPlugins waits a moment for the plugin list that follows
// rabbitmqStarted in the broker's log, then checks it.
func (b *Broker) waitPlugins() error {
	var err error
	for range 10 {
		if err = RabbitMQPluginsError(b.Log(), b.spec.Plugins); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
