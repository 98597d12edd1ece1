package agent

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"

	"github.com/spanperf/spanperf/internal/probe/nodeprobe"
)

// Main runs `spanperf agent SUBCOMMAND ...` and returns the exit status:
//
//	serve  [--listen ADDR] [--name SITE]   serve every mode (prints a Ready line); mode who answers SITE
//	client --mode stream|rr|crr --target ADDR:PORT [options]   (--rate R: open-loop rr)
//	http-serve [--listen ADDR] [--tls] [--body-size B] [--delay D]   serve HTTP/1.1 and HTTP/2
//	http --target ADDR:PORT --protocol http1|http2 [--rate R] [options]   HTTP client
//	messaging-respond --protocol amqp091|amqp10|nats --target HOST:PORT [--consumers N] [--in-flight N] [--durable] [--delay D]   answer each request through a broker with its body
//	messaging --protocol amqp091|amqp10|nats --target HOST:PORT --rate R [--connections N] [--in-flight N] [--body-size B] [--durable] --duration D [--warmup D]   paced request-response through a broker, result as JSON
//	messaging-stream --target HOST:PORT --rate R [--consumers N] [--body-size B] --duration D [--warmup D]   a paced producer and N consumers of a RabbitMQ stream, result as JSON
//	nodeprobe [--spec JSON] | --wait   the node probe (package nodeprobe): spec on stdin, one JSON result
//	burn --cores X --duration D   spin X CPUs' worth for D (a known cost)
//	firstup [--interval D] [--timeout D]   read HOST:PORT on stdin, probe it until a transaction succeeds (tunnel-up)
//	wanemu --route FROM>TO:delay=D,jitter=J,loss=P,rate=BPS ...   the userspace WAN emulator (package wanemu)
//	relay --listen ADDR --to HOST:PORT [--hold-bytes N] [--backup HOST:PORT --switch-after D]   forward TCP connections in userspace until SIGTERM (a component to size; with a backup, a known switch-over delay)
//	hold --target ADDR:PORT --count N [--connect-rate R] [--keepalive D]   open N connections, hold them until stdin closes (connections)
//	hold-serve [--listen ADDR] [--count N]   echo the keepalives of held connections (prints a Ready line)
//	failover --target HOST:PORT --duration D [--interval D]   a transaction (mode who) every interval; prints when the answering server changes, then every attempt
//	sleep                       block until SIGTERM or SIGINT (an agent pod's command)
//	run --pidfile FILE [--prog P] [--user U] [--env K=V]... -- ARGS...   write "PID START" to FILE, then exec spanperf (or P, from PATH; exit 127 when absent) ARGS in place, as user U
//	write [--mode M] [--user U] [--from F] /PATH   write stdin (or F) to PATH, making its directories
//	cat PATH...   write the files (a directory: its files) to stdout
//	rm /tmp/PATH...   remove the trees (only under /tmp)
//	cpu   print the CPU seconds this container's cgroup has used
//	listening --port P [--wait D]   exit 0 once a TCP socket listens on P in this network namespace
//	signal --pidfile FILE --signal TERM|KILL [--wait D]   signal the process FILE names (exit 3: not running)
//
// sleep, run, write, cat, rm, listening and signal let a pod site, where the image
// holds only /spanperf and no shell, keep its pod up, run servers from
// another image (nginx, PostgreSQL) with the files they need, and stop
// what it started by exec: ending an exec stream does not end the remote
// process.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: spanperf agent serve|client|http-serve|http|messaging|messaging-respond|messaging-stream|sleep|run|write|cat|rm|cpu|listening|signal|nodeprobe|burn|wanemu|firstup|failover|relay|hold|hold-serve [flags]")
		return 2
	}
	switch args[0] {
	case "nodeprobe":
		return nodeprobe.Main(args[1:], os.Stdin, stdout, stderr)
	case "burn":
		return burnMain(args[1:], stderr)
	case "wanemu":
		return wanemuMain(args[1:], stdout, stderr)
	case "firstup":
		return firstupMain(args[1:], os.Stdin, stdout, stderr)
	case "relay":
		return relayMain(args[1:], stderr)
	case "hold", "hold-serve":
		return holdMain(args, os.Stdin, stdout, stderr)
	case "failover":
		return failoverMain(args[1:], stdout, stderr)
	case "http-serve", "http":
		return httpMain(args, stdout, stderr)
	case "messaging", "messaging-respond":
		return messagingMain(args, stdout, stderr)
	case "messaging-stream":
		return messagingStreamMain(args[1:], stdout, stderr)
	case "sleep", "run", "write", "cat", "rm", "cpu", "listening", "signal":
		return podMain(args, os.Stdin, stdout, stderr)
	case "serve":
		fs := flag.NewFlagSet("agent serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", ":"+strconv.Itoa(DefaultPort), "address to listen on")
		name := fs.String("name", "", "name to answer mode who with (the site)")
		if fs.Parse(args[1:]) != nil || len(*name) > 255 {
			return 2
		}
		if err := ServeAs(*listen, *name, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	case "client":
		var s ClientSpec
		var target string
		fs := flag.NewFlagSet("agent client", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.StringVar(&s.Mode, "mode", "", "stream, rr or crr")
		fs.StringVar(&target, "target", "", "server HOST:PORT (an address, or a name looked up once before the run)")
		fs.DurationVar(&s.Duration, "duration", 0, "measured time")
		fs.DurationVar(&s.Warmup, "warmup", 0, "time before measuring")
		fs.DurationVar(&s.Interval, "interval", 0, "series bucket width (default 1s)")
		fs.IntVar(&s.MessageSize, "message-size", 0, "bytes per write (stream)")
		fs.IntVar(&s.Streams, "streams", 1, "parallel connections (stream)")
		fs.StringVar(&s.Congestion, "congestion", "", "TCP congestion control of the stream connections (default: the namespace's)")
		fs.IntVar(&s.RequestSize, "request-size", 0, "request bytes (rr, crr)")
		fs.IntVar(&s.ResponseSize, "response-size", 0, "response bytes (rr, crr)")
		fs.IntVar(&s.Concurrency, "concurrency", 1, "connections (rr) or parallel loops (crr)")
		fs.Float64Var(&s.Rate, "rate", 0, "rr only: offered transactions/s across all connections, paced, latency from the intended send time (0: closed loop)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		return clientMain("client", target, stdout, stderr, func(addr netip.AddrPort) (*Result, error) {
			s.Target = addr
			return RunClient(s)
		})
	}
	fmt.Fprintf(stderr, "spanperf agent: unknown subcommand %q\n", args[0])
	return 2
}
