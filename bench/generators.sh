#!/usr/bin/env bash
# Built-in generators against iperf3 and sockperf, side by side in one run.
# Usage: bench/generators.sh [--reps N] [--duration D] ...   (needs root, iperf3, sockperf)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
go build -o bin/bench-generators ./bench/generators
make -s build # bin/spanperf, whose up and down it times
exec bin/bench-generators "$@"
