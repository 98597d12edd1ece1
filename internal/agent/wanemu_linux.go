package agent

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spanperf/spanperf/internal/wanemu"
)

// routeFlags collects repeated --route flags.
type routeFlags []wanemu.Route

func (r *routeFlags) String() string { return fmt.Sprint(len(*r), " routes") }
func (r *routeFlags) Set(s string) error {
	rt, err := wanemu.ParseRoute(s)
	if err != nil {
		return err
	}
	*r = append(*r, rt)
	return nil
}

// WANEmuReady is the line `agent wanemu` prints once packets go through it.
type WANEmuReady struct {
	Ready   bool   `json:"ready"`
	Dev     string `json:"dev"`
	Offload bool   `json:"offload"`
}

// wanemuMain runs `spanperf agent wanemu --route FROM>TO:delay=D,... ...`
// in the namespace to emulate: it prints a WANEmuReady line, emulates
// until SIGTERM or SIGINT, removes its device and rules, and prints its
// wanemu.Stats as one JSON line.
func wanemuMain(args []string, stdout, stderr io.Writer) int {
	var spec wanemu.Spec
	fs := flag.NewFlagSet("agent wanemu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&spec.Dev, "dev", wanemu.DefaultDev, "TUN device to make")
	fs.IntVar(&spec.Table, "table", wanemu.DefaultTable, "routing table whose default route is the device")
	fs.Var((*routeFlags)(&spec.Routes), "route", "FROM>TO:delay=D,jitter=J,loss=P,rate=BPS,queue=BYTES (repeat; first match wins)")
	fs.DurationVar(&spec.SpinBelow, "spin", wanemu.DefaultSpin, "poll the clock this close to a release time (negative: never)")
	fs.Uint64Var(&spec.Seed, "seed", 0, "seed of loss and jitter (0: random)")
	if fs.Parse(args) != nil {
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	e, err := wanemu.New(spec)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	json.NewEncoder(stdout).Encode(WANEmuReady{Ready: true, Dev: spec.Dev, Offload: e.Stats().Offload})
	<-sig
	st := e.Stats()
	err = e.Close()
	json.NewEncoder(stdout).Encode(st)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
