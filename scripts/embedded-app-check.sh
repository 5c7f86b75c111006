#!/usr/bin/env bash
# Checks that the `Larder` library stands alone on SQLite, libmagic and libcrypto: its target
# depends on no PostgreSQL, S3 or curl module (the package manifest), and an app outside this
# package that depends on the `Larder` product builds, runs, and links neither libpq nor libcurl.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}

deps=$($SWIFT package dump-package | python3 -c '
import json, sys
package = json.load(sys.stdin)
target = next(t for t in package["targets"] if t["name"] == "Larder")
names = []
for d in target["dependencies"]:
    for kind in ("byName", "target", "product"):
        if kind in d: names.append(d[kind][0])
print(" ".join(names))')
echo "embedded-app-check: the Larder target depends on: $deps"
for forbidden in CPostgres CCurl LarderS3 LarderPostgres LarderS3Store; do
  if [[ " $deps " == *" $forbidden "* ]]; then
    echo "embedded-app-check: FAILED: the Larder target depends on $forbidden" >&2; exit 1
  fi
done

app=Examples/EmbeddedApp
$SWIFT build --package-path "$app" --scratch-path "$app/.build" -q
bin="$($SWIFT build --package-path "$app" --scratch-path "$app/.build" --show-bin-path)/EmbeddedApp"
if ldd "$bin" | grep -E 'libpq|libcurl'; then
  echo "embedded-app-check: FAILED: $bin links the libraries above" >&2; exit 1
fi
ldd "$bin" | grep -E 'libsqlite3|libmagic|libcrypto' | sed 's/^/embedded-app-check: links /'
"$bin"
echo "embedded-app-check: passed"
