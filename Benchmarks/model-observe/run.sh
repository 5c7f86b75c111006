#!/usr/bin/env bash
# Cross-process model observation on SQLite: how soon a commit by another process reaches an
# observer. `larder-model-probe latency` observes Query(Ping) on a fresh data directory, starts
# itself as a second process that makes COUNT commits of one Ping each (INTERVAL_US apart), and
# prints the latency from each save() call in the writer to the first delivery holding it:
# p50, p99, max, mean over COUNT commits. A measurement, never a test.
#
#   Benchmarks/model-observe/run.sh [COUNT=1000] [INTERVAL_US=2000]
#   PROBE_BIN=.build/debug/larder-model-probe Benchmarks/model-observe/run.sh   # a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/release-product.sh
PROBE_BIN=$(release_product larder-model-probe PROBE_BIN)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Not the test pass's PostgreSQL: this measures the SQLite catalog.
env -u LARDER_TEST_CATALOG "$PROBE_BIN" latency "$tmp/data" "${1:-1000}" "${2:-2000}"
