#!/usr/bin/env bash
# tus upload benchmark: 256 MiB in 8 MiB and in 1 MiB PATCHes (one keep-alive connection) through
# Larder, tusd 1.13 (the reference tus server, $LARDER_PEERS/tusd/tusd) and fastapi-tusd under
# uvicorn, interleaved within each of ROUNDS rounds. Prints medians, all runs and the speed ratios;
# a missing tusd is printed as missing.
#   Benchmarks/tus/run.sh            (uses the release build; builds it if missing)
#   LARDER_BIN=path SIZE_MIB=64 CHUNK_MIB=8,1 ROUNDS=3 LARDER_PEERS=dir Benchmarks/tus/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=Benchmarks/.venv-bench
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import fastapi_tusd, uvicorn, requests" 2>/dev/null; then
  echo "bench: creating $VENV with fastapi-tusd, uvicorn, requests"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check fastapi-tusd uvicorn requests
fi

if [ -z "${LARDER_BIN:-}" ]; then
  LARDER_BIN="$(swift build -c release --show-bin-path)/larder"
  [ -x "$LARDER_BIN" ] || swift build -c release --product larder
fi

# Peers: LARDER_PEERS, else ../shared/peers beside the repository (a missing peer is reported).
PEERS="${LARDER_PEERS:-../shared/peers}"

exec "$VENV/bin/python" Benchmarks/tus/bench.py --larder "$LARDER_BIN" --tusd "$PEERS/tusd/tusd" \
  --size-mib "${SIZE_MIB:-256}" --chunk-mib "${CHUNK_MIB:-8,1}" --rounds "${ROUNDS:-3}"
