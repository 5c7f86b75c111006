#!/usr/bin/env bash
# Object-change events: uploads/s with and without a subscription, and the commit-to-receiver
# delay at 200 uploads/s (see bench.py). A measurement, never a test.
#
#   Benchmarks/events/run.sh                          # the release build
#   LARDER_BIN=.build/debug/larder Benchmarks/events/run.sh
#   BENCH_EVENTS_AB=old=/tmp/larder-old,new=.build/release/larder Benchmarks/events/run.sh   # A/B, same rounds
set -euo pipefail
cd "$(dirname "$0")/../.."
# The throughput runs' receiver is nginx (a process of its own, as a receiver would be).
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
fi
if [ -z "${LARDER_BIN:-}" ]; then
  swift build -c release --product larder >&2
  LARDER_BIN="$(swift build -c release --show-bin-path)/larder"
fi
export LARDER_BIN
env -u LARDER_TEST_CATALOG python3 Benchmarks/events/bench.py
