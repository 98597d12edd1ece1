package workload

import (
	"regexp"
	"strconv"
)

// rabbitmqStreamPlugin is RabbitMQ's stream protocol plugin (Debian's
// rabbitmq-server ships it; BrokerSpec.Stream enables it).
const rabbitmqStreamPlugin = "rabbitmq_stream"

// RabbitMQStreamConfig is the rabbitmq.conf StartBroker writes for a
// stream broker (BrokerSpec.Stream): as RabbitMQConfig, but port is the
// stream protocol's, AMQP listens nowhere, and the broker advertises host
// and port to stream clients (the stream protocol tells a client where a
// stream's leader is; left alone it names the machine's host name).
func RabbitMQStreamConfig(port int, host string) string {
	return "loopback_users = none\n" +
		"listeners.tcp = none\n" +
		"stream.listeners.tcp.1 = " + strconv.Itoa(port) + "\n" +
		"stream.advertised_host = " + host + "\n" +
		"stream.advertised_port = " + strconv.Itoa(port) + "\n" +
		"log.console = true\nlog.console.level = info\nlog.file = false\n"
}

// rabbitmqConfigFor is the rabbitmq.conf and the plugins spec asks for.
func rabbitmqConfigFor(spec BrokerSpec) (conf string, plugins []string) {
	if !spec.Stream {
		return RabbitMQConfig(spec.Port), spec.Plugins
	}
	host := spec.AdvertisedHost
	if host == "" {
		host = "127.0.0.1"
	}
	return RabbitMQStreamConfig(spec.Port, host), append(append([]string(nil), spec.Plugins...), rabbitmqStreamPlugin)
}

// ranchListenerFailed is RabbitMQ's line for a listener (AMQP's, the
// stream plugin's) that could not start: its listen options, long enough
// to push the reason past BrokerLogError's limit, sit between the
// listener and the reason.
var ranchListenerFailed = regexp.MustCompile(`^(Failed to start Ranch listener \S+) in .* (for reason .*)$`)

// shortenRabbitMQError keeps what a RabbitMQ error message says and drops
// what buries it (the listen options of a listener that failed).
func shortenRabbitMQError(msg string) string {
	return ranchListenerFailed.ReplaceAllString(msg, "$1 $2")
}
