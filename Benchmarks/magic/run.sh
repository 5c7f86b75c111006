#!/usr/bin/env bash
# libmagic's CPU per magic_buffer() call, file by file, for Larder's configuration and the
# alternatives (flags, head length, libmagic parameters), with every MIME difference listed.
# This is how ContentSniffer's configuration was chosen; see Benchmarks/magic/README.md.
#
#   Benchmarks/magic/run.sh                       # the default comparison below
#   Benchmarks/magic/run.sh base base+encoding=8192  # any configurations (magic_bench.c syntax)
#   MAGIC_BENCH_ROUNDS=15 Benchmarks/magic/run.sh # more rounds per file (default 7)
#
# Installs what it needs: ffmpeg and a C compiler from Debian, and Pillow, pillow-heif, openpyxl
# and python-docx from PyPI into Benchmarks/.venv-magic. The corpus is generated into a temp dir
# (removed at exit); MAGIC_CORPUS=DIR keeps it there instead.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v ffmpeg >/dev/null 2>&1 || need+=(ffmpeg)
command -v cc >/dev/null 2>&1 || need+=(gcc)
[ -f /usr/include/magic.h ] || need+=(libmagic-dev)
if ((${#need[@]})); then
  echo "magic: installing ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || echo "magic: apt-get install failed for ${need[*]}; the files they make are skipped" >&2
fi

VENV=Benchmarks/.venv-magic
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if ! "$VENV/bin/python" -c "import PIL, pillow_heif, openpyxl, docx" 2>/dev/null; then
  echo "magic: installing Pillow, pillow-heif, openpyxl, python-docx into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check Pillow pillow-heif openpyxl python-docx >&2 \
    || echo "magic: pip install failed; the files they make are skipped" >&2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/larder-magic.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CORPUS="${MAGIC_CORPUS:-$WORK/corpus}"
"$VENV/bin/python" Benchmarks/magic/make_corpus.py "$CORPUS"
cc -O2 -Wall -o "$WORK/magic_bench" Benchmarks/magic/magic_bench.c -lmagic

if (($# == 0)); then
  # Larder's configuration before (base) and after (base+encoding=16384), then each alternative.
  set -- base base+encoding=16384 base+encoding=32768 base+encoding=8192 base+regex=4096 base+head=16384 \
    base+NO_CHECK_ELF base+NO_CHECK_APPTYPE base+NO_CHECK_TOKENS base+NO_CHECK_CDF base+NO_CHECK_TAR \
    base+NO_CHECK_CSV base+NO_CHECK_JSON base+NO_CHECK_ENCODING base+NO_CHECK_TEXT
fi
echo "magic: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start" >&2
MAGIC_BENCH_ROUNDS="${MAGIC_BENCH_ROUNDS:-7}" "$WORK/magic_bench" "$CORPUS" "$@" >"$WORK/results.tsv"
echo "magic: load average $(cut -d' ' -f1-3 /proc/loadavg) at end" >&2
python3 Benchmarks/magic/summarize.py "$WORK/results.tsv" --table "$1" "${2:-$1}"
