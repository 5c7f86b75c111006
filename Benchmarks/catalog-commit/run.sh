#!/usr/bin/env bash
# Catalog commits per second: 400 serial 4 KiB uploads through the library (`objects.put`, each
# new content), on SQLite and, with a PostgreSQL URL, on a fresh schema of that server (fsync as
# the server has it). Prints commits/s and CPU µs per commit. A measurement, never a test.
#
#   Benchmarks/catalog-commit/run.sh [POSTGRES_URL] [COUNT=400]
#   COMMIT_BENCH_BIN=.build/debug/larder-commit-bench Benchmarks/catalog-commit/run.sh   # a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
. Benchmarks/lib/release-product.sh
bench=$(release_product larder-commit-bench COMMIT_BENCH_BIN)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bench" "$tmp" "${1:-}" "${2:-400}"
