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
  # Neither library may be needed by the program itself, nor reached through anything but
  # libvips: Debian's libvips 8.14 loads libcurl through its FITS and HDF5 loaders (cfitsio,
  # hdf5), which Larder does not control; that is said, not hidden.
  if readelf -d "$bin" | grep -E 'NEEDED.*(libpq|libcurl)'; then
    echo "embedded-app-check: FAILED: $bin needs the libraries above itself" >&2; exit 1
  fi
  vips=$(ldd "$bin" | awk '/libvips/ {print $3}')
  for lib in $(ldd "$bin" | awk '/libpq|libcurl/ {print $1}'); do
    if [[ -n "$vips" ]] && [[ "$lib" != libpq* ]] && ldd "$vips" | grep -q "^[[:space:]]*$lib "; then
      echo "embedded-app-check: $name reaches $lib only through $(basename "$vips") (Debian's build)"
    else
      echo "embedded-app-check: FAILED: $bin links $lib" >&2; exit 1
    fi
  done
  ldd "$bin" | grep -E 'libsqlite3|libmagic|libcrypto' | sed "s/^/embedded-app-check: $name links /"
  "$bin"
done
echo "embedded-app-check: passed"
