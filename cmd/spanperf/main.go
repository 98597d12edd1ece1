// Command spanperf measures what it costs to connect workloads across sites.
package main

import (
	"os"

	"github.com/spanperf/spanperf/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
