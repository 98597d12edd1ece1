package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spanperf/spanperf/internal/results"
	"github.com/spanperf/spanperf/internal/scenario"
	"github.com/spanperf/spanperf/internal/testbed"
)

// IPerf3Tool is iperf3 and its Debian package.
var IPerf3Tool = Tool{Prog: "iperf3", Pkg: "iperf3"}

// IPerf3Info registers the iperf3 driver: TCP bulk transfer measured by
// iperf3 itself, reported like the built-in stream workload.
func IPerf3Info() Info {
	return Info{
		Name:    "iperf3",
		Summary: "iperf3 TCP bulk transfer (JSON output): throughput (receiver bytes), per-second series, retransmits",
		Params: []scenario.Field{
			sizeField("message_size", "bytes per write (iperf3 -l)", 131072),
			countField("streams", "parallel TCP connections (iperf3 -P)"),
		},
		New: func() Workload { return IPerf3{} },
	}
}

// IPerf3 runs `iperf3 -s` in the server site and `iperf3 -c -J` in the
// client site. iperf3 takes whole seconds: the duration is rounded up to
// at least 1 s and the warmup (iperf3 -O, omitted from the summary) up.
type IPerf3 struct{}

var (
	_ Workload = IPerf3{}
	_ Checker  = IPerf3{}
)

// Check says whether iperf3 is installed.
func (IPerf3) Check(context.Context) error { return IPerf3Tool.Check() }

// Run implements Workload.
func (w IPerf3) Run(ctx context.Context, env Env) (*Result, error) {
	if err := w.Check(ctx); err != nil {
		return nil, err
	}
	port := strconv.Itoa(env.Port)
	srv, err := startToolServer(ctx, env.Server, testbed.Command{Name: "iperf3-server", Path: "iperf3",
		Args: []string{"-s", "-p", port, "--one-off"}}, env.Port)
	if err != nil {
		return nil, fmt.Errorf("iperf3: %w", err)
	}
	defer srv.Stop(time.Second)
	secs, omit := wholeSeconds(env.Duration, 1), wholeSeconds(env.Warmup, 0)
	args := []string{"-c", env.Target.Host, "-p", strconv.Itoa(env.Target.Port),
		"-J", "-i", "1", "-t", strconv.Itoa(secs), "-O", strconv.Itoa(omit),
		"-l", strconv.FormatInt(intParam(env.Params, "message_size", 131072), 10),
		"-P", strconv.FormatInt(intParam(env.Params, "streams", 1), 10)}
	// iperf3's figures cover -t whole seconds after its -O omitted ones.
	env.measure(time.Duration(omit)*time.Second, time.Duration(secs)*time.Second)
	srvCPU := watchCPU(srv, time.Duration(omit)*time.Second, time.Duration(secs)*time.Second)
	defer srvCPU.stop()
	out, runErr := runToolClient(ctx, env.Client, testbed.Command{Name: "iperf3", Path: "iperf3", Args: args},
		time.Duration(secs+omit)*time.Second+30*time.Second)
	res, err := ParseIPerf3(out)
	if err != nil {
		if runErr != nil && !errors.Is(err, errToolReported) {
			return nil, fmt.Errorf("iperf3: %w", runErr)
		}
		return nil, fmt.Errorf("iperf3: %w", err)
	}
	if s, ok := srvCPU.seconds(); ok {
		res.Metrics[results.CPUSecondsServer] = s
	}
	return res, nil
}

// errToolReported marks an error the tool itself reported in its output.
var errToolReported = errors.New("tool reported an error")

// iperf3Sum is one sum object of iperf3's JSON output.
type iperf3Sum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         float64 `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	Retransmits   float64 `json:"retransmits"`
	Omitted       bool    `json:"omitted"`
}

// iperf3Output is the part of `iperf3 -J` output the driver reads.
type iperf3Output struct {
	Intervals []struct {
		Sum iperf3Sum `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent     *iperf3Sum `json:"sum_sent"`
		SumReceived *iperf3Sum `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// ParseIPerf3 reads the JSON output of an iperf3 client (-J): throughput
// and bytes as the receiver counted them, the sender's retransmits, and
// the per-second throughput outside the omitted (warmup) intervals. An
// output that carries iperf3's "error" is an error quoting it.
func ParseIPerf3(out []byte) (*Result, error) {
	var o iperf3Output
	if err := json.Unmarshal(out, &o); err != nil {
		return nil, fmt.Errorf("bad output %q: %w", truncate(string(out), 200), err)
	}
	if o.Error != "" {
		return nil, fmt.Errorf("%w: %s", errToolReported, o.Error)
	}
	if o.End.SumReceived == nil || o.End.SumSent == nil {
		return nil, errors.New("output has no end summary")
	}
	r, s := o.End.SumReceived, o.End.SumSent
	res := &Result{
		Metrics: map[string]float64{
			results.ThroughputBPS: r.BitsPerSecond,
			results.Bytes:         r.Bytes,
			results.Retransmits:   s.Retransmits,
			results.DurationS:     r.Seconds,
		},
		Series: map[string]results.Series{},
	}
	var vals []float64
	for _, iv := range o.Intervals {
		if !iv.Sum.Omitted {
			vals = append(vals, iv.Sum.BitsPerSecond)
		}
	}
	if len(vals) > 0 {
		res.Series[results.ThroughputBPS] = results.Series{Interval: 1, Values: vals}
	}
	return res, nil
}
