#!/usr/bin/env bash
# Runs every example of a Markdown file marked for testing against a live, throw-away server
# (ReadmeExamplesTests runs it on README.md and the docs/ pages that carry examples).
#
#   LARDER_BIN=.build/debug/larder interop/readme/run_examples.sh [FILE]   (default README.md)
#
# A block is tested when the line right before its opening ```sh fence is exactly
# `<!-- readme-test -->`. Blocks run in order, in one scratch directory, each in its own
# `bash` with `set -euo pipefail`, with LARDER=http://127.0.0.1:PORT exported; the first
# failing block fails the run (exit 1) after printing the block and its output.
set -euo pipefail

file="${1:-README.md}"
bin="${LARDER_BIN:-.build/debug/larder}"
[[ -f "$file" ]] || { echo "run_examples: no such file: $file" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "run_examples: larder binary not found at $bin (set LARDER_BIN)" >&2; exit 2; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
file="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"

work="$(mktemp -d "${TMPDIR:-/tmp}/larder-readme.XXXXXX")"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Extract the marked blocks into work/blocks/NNN.sh.
mkdir -p "$work/blocks" "$work/data" "$work/cwd"
awk -v dir="$work/blocks" '
  BEGIN { n = 0; marked = 0; inblock = 0 }
  inblock && /^```[ \t]*$/ { inblock = 0; close(out); next }
  inblock { print > out; next }
  marked && /^```sh[ \t]*$/ { n++; out = sprintf("%s/%03d.sh", dir, n); printf "" > out; inblock = 1; marked = 0; next }
  { marked = ($0 ~ /^<!-- readme-test -->[ \t]*$/) }
  END { if (inblock) { print "run_examples: unterminated ```sh block" > "/dev/stderr"; exit 3 } }
' "$file"
blocks=("$work"/blocks/*.sh)
if [[ ! -e "${blocks[0]}" ]]; then
  echo "run_examples: no <!-- readme-test --> blocks in $file" >&2
  exit 0
fi

# Start the server on a free port and read the bound address from its first line.
"$bin" serve --allow-all --port 0 --data "$work/data" >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
for _ in $(seq 1 300); do
  if grep -q '^listening on http://' "$work/server.out" 2>/dev/null; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "run_examples: the server exited early:" >&2; cat "$work/server.err" >&2; exit 1
  fi
  sleep 0.1
done
url="$(grep -m1 '^listening on http://' "$work/server.out" | sed 's/^listening on //')"
[[ -n "$url" ]] || { echo "run_examples: the server did not report its address" >&2; cat "$work/server.err" >&2; exit 1; }
export LARDER="$url"

count=0
for block in "${blocks[@]}"; do
  count=$((count + 1))
  if ! (cd "$work/cwd" && bash -euo pipefail "$block") >"$work/block.out" 2>&1; then
    echo "run_examples: block $count of $file failed:" >&2
    sed 's/^/  | /' "$block" >&2
    echo "output:" >&2
    sed 's/^/  > /' "$work/block.out" >&2
    exit 1
  fi
done
echo "run_examples: $count block(s) of $(basename "$file") passed against $url"
