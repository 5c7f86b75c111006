#!/usr/bin/env bash
# Checks that the `Larder` library stands alone on SQLite, libmagic and libcrypto, and that the
# `LarderServer` library needs no more than that for storage: neither target depends on a
# PostgreSQL, S3 or curl module (the package manifest; the executable composes those), and an
# app outside this package that depends on the `Larder` product, and one that embeds the HTTP
# server (`LarderServer`), each build, run, and link neither libpq nor libcurl.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}

manifest=$($SWIFT package dump-package)
for target in Larder LarderServer; do
  deps=$(python3 -c '
import json, sys
package = json.loads(sys.argv[2])
target = next(t for t in package["targets"] if t["name"] == sys.argv[1])
names = []
for d in target["dependencies"]:
    for kind in ("byName", "target", "product"):
        if kind in d: names.append(d[kind][0])
print(" ".join(names))' "$target" "$manifest")
  echo "embedded-app-check: the $target target depends on: $deps"
  for forbidden in CPostgres CCurl LarderS3 LarderPostgres LarderS3Store LarderWebhooks; do
    if [[ " $deps " == *" $forbidden "* ]]; then
      echo "embedded-app-check: FAILED: the $target target depends on $forbidden" >&2; exit 1
    fi
  done
done

for app in Examples/EmbeddedApp Examples/EmbeddedServer; do
  name=$(basename "$app")
  $SWIFT build --package-path "$app" --scratch-path "$app/.build" -q
  bin="$($SWIFT build --package-path "$app" --scratch-path "$app/.build" --show-bin-path)/$name"
  if ldd "$bin" | grep -E 'libpq|libcurl'; then
    echo "embedded-app-check: FAILED: $bin links the libraries above" >&2; exit 1
  fi
  ldd "$bin" | grep -E 'libsqlite3|libmagic|libcrypto' | sed "s/^/embedded-app-check: $name links /"
  "$bin"
done
echo "embedded-app-check: passed"
