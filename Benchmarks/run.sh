#!/usr/bin/env bash
# Larder's benchmark suite: Larder side by side with nginx on this machine, in one run, and
# against the machine's own limits (SHA-256/MD5 speed, write+fsync, page-cache read).
# Installs what it needs (Debian packages), then hands over to Benchmarks/lib/bench.py, which
# starts and stops every server itself, keeps all data in one temp dir and removes it at exit.
#
#   make bench                                   # builds release, then runs this
#   LARDER_BIN=/path/to/larder Benchmarks/run.sh # a binary built elsewhere
#   BENCH_QUICK=1 Benchmarks/run.sh              # small sizes, short runs: a check in a few minutes
#   BENCH_ONLY=gets,tus Benchmarks/run.sh         # some scenarios only
#   BENCH_GC_SCALE=1 Benchmarks/run.sh           # also the gc-scale benchmark (long)
#   BENCH_S3=1 Benchmarks/run.sh                 # also Larder on PostgreSQL + S3 vs curl to Swift (~5 min)
# Every knob is listed in Benchmarks/README.md. Results: stdout and Benchmarks/results/latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if ((${#need[@]})); then
  echo "bench: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
    # wrk is optional (bench.py falls back to a Python keep-alive client); the rest is not.
    echo "bench: apt-get install failed for ${need[*]}; continuing with what is there" >&2
  fi
fi

if [ -z "${LARDER_BIN:-}" ]; then
  LARDER_BIN="$(swift build -c release --show-bin-path)/larder"
fi
if [ ! -x "$LARDER_BIN" ]; then
  echo "bench: no larder binary at $LARDER_BIN; run: swift build -c release --product larder" >&2
  exit 1
fi
export LARDER_BIN

# The Python tus peer (fastapi-tusd under uvicorn, from PyPI) lives in a virtualenv of its own;
# when it cannot be installed (no network) the run goes on and reports the peer as missing.
VENV=Benchmarks/.venv-bench
PYTHON=python3
if [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >/dev/null 2>&1; then
  PYTHON="$VENV/bin/python"
  if ! "$PYTHON" -c "import fastapi_tusd, uvicorn" 2>/dev/null; then
    echo "bench: installing fastapi-tusd and uvicorn into $VENV" >&2
    "$PYTHON" -m pip install -q --disable-pip-version-check fastapi-tusd uvicorn >&2 \
      || echo "bench: pip install failed; fastapi-tusd will be reported as missing" >&2
  fi
fi
exec "$PYTHON" Benchmarks/lib/bench.py "$@"
