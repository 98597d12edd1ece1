// Package cli is spanperf's command line: every subcommand as a function of
// its arguments and output streams, so the binary is testable in-process.
package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spanperf/spanperf/internal/agent"
	"github.com/spanperf/spanperf/internal/version"
)

const usage = `spanperf measures what it costs to connect workloads across sites.

Usage:
  spanperf run -f FILE [--out DIR] [--duration D] [--reps N] [--datapath a,b] [--workload x,y] [--seed N]
  spanperf run --resume DIR       continue an interrupted run
  spanperf summary DIR            print the summary table of a run
  spanperf report DIR [DIR...] [--format html|md|csv|json] [-o FILE] [--baseline X] [--reference FILE.csv]
  spanperf compare OLD NEW [--threshold 5%] [--allow-inconclusive]
                                  exit 0 no regression, 1 regression, 2 inconclusive,
                                  3 usage or read error (see compare --help)
  spanperf up -f FILE [--datapath X]   build a testbed and leave it up to poke at
  spanperf down                   remove what 'up' left
  spanperf clean                  remove what a killed run left behind
  spanperf doctor                 what can run on this machine, and why not
  spanperf list                   datapaths and workloads
  spanperf image -o FILE [--tag REF] [--binary PATH] [--push REF]
                                  build the agent image (a static binary at /spanperf)
                                  as a tarball for ctr/docker load, or push it
  spanperf version
`

// Main runs spanperf with args (without the program name) and returns the
// exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted; compare
// has its own (see cmdCompare): 0 no regression, 1 regression, 2
// inconclusive, 3 bad usage or a run it could not read.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(rest, stdout, stderr)
	case "summary":
		return cmdSummary(rest, stdout, stderr)
	case "report":
		return cmdReport(rest, stdout, stderr)
	case "compare":
		return cmdCompare(rest, stdout, stderr)
	case "up":
		return cmdUp(rest, stdout, stderr)
	case "down":
		return cmdClean(rest, stdout, stderr, true)
	case "clean":
		return cmdClean(rest, stdout, stderr, false)
	case "doctor":
		return cmdDoctor(rest, stdout, stderr)
	case "list":
		return cmdList(rest, stdout, stderr)
	case "image":
		return cmdImage(rest, stdout, stderr)
	case "agent":
		return agent.Main(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "spanperf %s (%s)\n", version.Version, version.Revision)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "spanperf: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
