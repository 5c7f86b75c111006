#!/usr/bin/env bash
# CRC32C (LarderCrypto/CRC32C.swift: the SSE 4.2 instruction and the slice-by-8 tables) in MB/s on this machine, optimized
# (-O, as `swift build -c release` builds it) and not (-Onone, the debug build tests run),
# beside OpenSSL's MD5 and SHA-256 on one core for scale. A measurement, never a test.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for opt in -O -Onone; do
  swiftc "$opt" -parse-as-library -I ../../Sources/CCRC32C -package-name crcbench -module-name CRCBench ../../Sources/LarderCrypto/CRC32C.swift main.swift -o "$tmp/bench$opt" 2>/dev/null \
    || swiftc "$opt" -I ../../Sources/CCRC32C -package-name crcbench -module-name CRCBench ../../Sources/LarderCrypto/CRC32C.swift main.swift -o "$tmp/bench$opt"
  printf '%-7s ' "$opt"; "$tmp/bench$opt" "${1:-5}"
done
for alg in md5 sha256; do
  openssl speed -evp "$alg" -bytes 1048576 -seconds 2 2>/dev/null | awk -v a="$alg" '/^(md5|sha256)/ {printf "openssl %s: %.0f MB/s (1 MiB blocks, one core)\n", a, $NF/1000}'
done
