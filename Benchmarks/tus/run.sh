#!/usr/bin/env bash
# The tus scenario of the benchmark suite alone: 256 MiB over one keep-alive connection in 8 MiB
# and 1 MiB PATCHes through Larder, tusd 1.13 ($LARDER_PEERS/tusd/tusd) and fastapi-tusd under
# uvicorn, interleaved within each of BENCH_REPS rounds (see Benchmarks/README.md).
#   Benchmarks/tus/run.sh
#   LARDER_BIN=path BENCH_TUS_MIB=64 BENCH_TUS_CHUNK_MIB=8,1 BENCH_REPS=3 LARDER_PEERS=dir Benchmarks/tus/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_ONLY=tus BENCH_OUT="${BENCH_OUT:-/dev/null}" exec Benchmarks/run.sh "$@"
