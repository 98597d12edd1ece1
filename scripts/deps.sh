#!/usr/bin/env bash
# Installs what spanperf needs when it is missing: Debian packages through
# apt-get and Go modules through the module proxy. Usage: scripts/deps.sh [test|bench]
set -euo pipefail
cd "$(dirname "$0")/.."

want=(iproute2 ca-certificates procps python3
  wireguard-go wireguard-tools
  strongswan strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
  libnss3-tools openssl # the libreswan path's NSS databases (libreswan itself conflicts with strongSwan: not installed)
  haproxy openvswitch-switch socat ethtool
  iperf3 sockperf wrk nginx nghttp2-client postgresql # the standard-tool workloads
  rabbitmq-server nats-server # the messaging workload's brokers
  prometheus # a real Prometheus for the known-answer test of prometheus: URL
  chromium) # headless, for the HTML report's browser test
case "${1:-}" in
  bench) want+=(iperf3 sockperf) ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# libreswan conflicts with strongSwan: its .deb is unpacked, never installed,
# so a test can run its config parser on what spanperf writes (else it skips).
lsdir=/var/tmp/spanperf-libreswan
if [ ! -x "$lsdir/root/usr/libexec/ipsec/addconn" ] && [ "$(id -u)" -eq 0 ]; then
  mkdir -p "$lsdir"
  (cd "$lsdir" && apt-get download -qq libreswan >/dev/null 2>&1 && dpkg-deb -x libreswan_*.deb root) ||
    echo "deps: could not unpack libreswan's .deb into $lsdir (its config-parser test will skip)" >&2
fi

if ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "deps: add /usr/local/go/bin to PATH" >&2
  else
    echo "deps: Go is missing: install Go 1.26 or newer (https://go.dev/dl) or Debian's golang-go" >&2
  fi
  exit 1
fi
go mod download
