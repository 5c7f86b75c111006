#!/usr/bin/env bash
# larder backup against rsync -a of the same data directory, to the same disk (issue 35): a
# full backup of N small blobs plus large ones, an incremental one after 1 % new content, and
# the restore. A measurement, never a test. Sizes (defaults: the issue's):
#
#   Benchmarks/backup/run.sh                                   # release build, 100,000 + 2 GiB
#   BACKUP_BENCH_SMALL=10000 BACKUP_BENCH_LARGE_MIB=256 Benchmarks/backup/run.sh   # a quick run
#   LARDER_BIN=.build/debug/larder BACKUP_BENCH_DIR=/var/tmp/bb Benchmarks/backup/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${LARDER_BIN:-}" ]; then
  swift build -c release --product larder >&2
  LARDER_BIN="$(swift build -c release --show-bin-path)/larder"
fi
command -v rsync >/dev/null || { echo "backup bench: rsync is not installed (apt-get install rsync)" >&2; exit 1; }
export LARDER_BIN
env -u LARDER_TEST_CATALOG -u LARDER_CATALOG -u LARDER_BLOBS python3 Benchmarks/backup/bench.py
