#!/usr/bin/env bash
# tus upload benchmark: 256 MiB in 8 MiB chunks through Larder and through fastapi-tusd under
# uvicorn, same machine, same run. Prints both times and the ratio.
#   Benchmarks/tus/run.sh            (uses the release build; builds it if missing)
#   LARDER_BIN=path SIZE_MIB=64 Benchmarks/tus/run.sh
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

exec "$VENV/bin/python" Benchmarks/tus/bench.py --larder "$LARDER_BIN" --size-mib "${SIZE_MIB:-256}" \
  --chunk-mib "${CHUNK_MIB:-8}" --rounds "${ROUNDS:-2}"
