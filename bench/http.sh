#!/usr/bin/env bash
# The built-in http generator against wrk (HTTP/1.1) and h2load (HTTP/2),
# same nginx, side by side in one run.
# Usage: bench/http.sh [--reps N] [--duration D] [--connections C] ...   (needs root, wrk, nghttp2-client, nginx)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
go build -o bin/bench-http ./bench/http
exec bin/bench-http "$@"
