#!/usr/bin/env bash
# The userspace WAN emulator's limits: stream throughput with 10 ms one way
# each way beside no emulator, and the emulator's delay error, in one run.
# Usage: bench/wan.sh [--reps N] [--duration D] [--delay D] [--streams N]   (needs root)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
go build -o bin/bench-wan ./bench/wan
exec bin/bench-wan "$@"
