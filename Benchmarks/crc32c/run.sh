#!/usr/bin/env bash
# CRC32C (LarderCrypto/CRC32C.swift, pure Swift slice-by-8) in MB/s on this machine, optimized
# (-O, as `swift build -c release` builds it) and not (-Onone, the debug build tests run),
# beside OpenSSL's MD5 and SHA-256 on one core for scale. A measurement, never a test.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for opt in -O -Onone; do
  swiftc "$opt" -parse-as-library -module-name CRCBench ../../Sources/LarderCrypto/CRC32C.swift main.swift -o "$tmp/bench$opt" 2>/dev/null \
    || swiftc "$opt" -module-name CRCBench ../../Sources/LarderCrypto/CRC32C.swift main.swift -o "$tmp/bench$opt"
  printf '%-7s ' "$opt"; "$tmp/bench$opt" "${1:-5}"
done
grep -q sse4_2 /proc/cpuinfo && echo "cpu: sse4_2 present (a crc32 instruction shim would be faster; not used: no C in Larder's targets)"
for alg in md5 sha256; do
  openssl speed -evp "$alg" -bytes 1048576 -seconds 2 2>/dev/null | awk -v a="$alg" '/^(md5|sha256)/ {printf "openssl %s: %.0f MB/s (1 MiB blocks, one core)\n", a, $NF/1000}'
done
