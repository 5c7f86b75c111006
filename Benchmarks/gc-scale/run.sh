#!/usr/bin/env bash
# Garbage collection on a generated store of N blobs (10 % orphans): `larder gc --dry-run`, then
# `larder gc`, each timed with its peak resident memory (/usr/bin/time -v), and a check that the
# dry run reported exactly what the collection then did. With GC_SCALE_VERIFY=1 also a full
# `larder verify` afterwards. A measurement, never a test; `make gc-scale` runs it.
#
#   Benchmarks/gc-scale/run.sh DIR [N=1000000]          # generates DIR afresh, then collects
#   GC_SCALE_REUSE=1 Benchmarks/gc-scale/run.sh DIR     # collects an already generated DIR
#   LARDER_BIN=/path/to/larder Benchmarks/gc-scale/run.sh DIR   # a binary built elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:?usage: Benchmarks/gc-scale/run.sh DIR [N]}
n=${2:-1000000}
larder=${LARDER_BIN:-"$(swift build -c release --show-bin-path)/larder"}
[ -x "$larder" ] || { echo "gc-scale: no larder binary at $larder; run: swift build -c release --product larder" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null
if [ "${GC_SCALE_REUSE:-0}" != 1 ]; then
  rm -rf "$dir"
  start=$(date +%s)
  python3 Benchmarks/gc-scale/generate.py "$dir" "$n"
  echo "gc-scale: generated $n blobs in $(( $(date +%s) - start )) s"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Not a test pass's PostgreSQL or S3: the generated store is a data directory.
run() { # label, then larder's arguments
  local label=$1; shift
  env -u LARDER_CATALOG -u LARDER_BLOBS /usr/bin/time -v "$larder" "$@" --data "$dir" >"$tmp/$label.json" 2>"$tmp/$label.time" || {
    cat "$tmp/$label.time" >&2; return 1; }
  awk -v l="$label" '/Elapsed \(wall clock\)/ {w=$NF} /Maximum resident set size/ {r=$NF}
    END {printf "gc-scale: %s %s wall, peak RSS %.0f MB\n", l, w, r/1024}' "$tmp/$label.time"
}
run dry-run gc --grace 1h --dry-run --json
run gc gc --grace 1h --json
cat "$tmp/gc.json"; echo
python3 - "$tmp/dry-run.json" "$tmp/gc.json" <<'PY'
import json, sys
dry, real = (json.load(open(p)) for p in sys.argv[1:])
strip = lambda r: {k: v for k, v in r.items() if k not in ("dryRun", "durationSeconds", "phaseSeconds")}
if strip(dry) != strip(real):
    sys.exit(f"gc-scale: the dry run reported {strip(dry)}, the collection did {strip(real)}")
print("gc-scale: the dry run's report equals the collection's")
PY
if [ "${GC_SCALE_VERIFY:-0}" = 1 ]; then run verify verify --json; fi
