#!/usr/bin/env bash
# Installs what Larder needs, if missing; safe to run again, does nothing when all is there.
#
#   scripts/deps.sh          everything `make test` needs: the build's packages, PostgreSQL, OpenStack
#                            Swift, Chromium, Node, rclone, and the Python virtualenv (.venv) of the
#                            interop clients
#   scripts/deps.sh serve    only what building and running the server needs (`make serve`,
#                            `make release`): the compiler's pkg-config and the C libraries' -dev packages
#   scripts/deps.sh [serve] --print   lists that mode's Debian packages and installs nothing
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=full
PRINT=0
for arg in "$@"; do
  case "$arg" in
    serve) MODE=serve ;;
    full) MODE=full ;;
    --print) PRINT=1 ;;
    *) echo "deps: unknown argument '$arg' (use: scripts/deps.sh [serve|full] [--print])" >&2; exit 2 ;;
  esac
done

# The build: one -dev package per C library the Swift targets link (Package.swift's systemLibrary
# providers), pkg-config to find them, libmagic's database (libmagic-mgc) for content detection.
PACKAGES=(pkg-config libsqlite3-dev libmagic-dev libmagic-mgc libssl-dev libre2-dev
          libpq-dev libcurl4-openssl-dev libvips-dev)
if [ "$MODE" = full ]; then
  PACKAGES+=(postgresql  # a throw-away PostgreSQL server for the catalog tests
             openssl curl python3-venv
             nodejs chromium  # the real Firebase JS SDK runs in node and headless Chromium (interop tests)
             chromium-driver)  # selenium drives that Chromium through it (the console's browser tests)
  # OpenStack Swift with its S3 API for the S3 tests on loopback (scripts/swift-s3.sh). Never
  # python3-swiftclient: its `swift` command shadows the Swift compiler.
  PACKAGES+=(swift-proxy swift-account swift-container swift-object memcached)
  # Image variants (issue 26): libvips's CLI (vipsthumbnail, the benchmark's limit), ImageMagick
  # (the benchmark's scripted peer).
  PACKAGES+=(libvips-tools imagemagick)
  # Go's Google API client (rclone's GCS backend) drives the GCS JSON API in the interop suite (issue 31).
  PACKAGES+=(rclone)
fi
if [ "$PRINT" = 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "$MODE" = full ] || exit 0

# Interop clients from PyPI, in a project-local virtualenv.
# google-auth, google-cloud-storage and firebase-admin: the Google clients a Firebase backend
# uses (service-account keys, /token, V4 signed URLs, the GCS JSON API; issue 22).
PY_PACKAGES=(tuspy==1.1.0 requests pytest google-auth==2.63.0 google-cloud-storage==3.17.1 firebase-admin==7.7.0
            selenium==4.50.0  # the console's browser tests (interop/console)
            functions-framework==3.10.2 cloudevents==1.12.0 standardwebhooks==1.3.0)  # object-change events' receivers (issue 32)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import tusclient, requests, pytest, google.auth, google.cloud.storage, firebase_admin, selenium, functions_framework, cloudevents, standardwebhooks" 2>/dev/null; then
  echo "deps: creating .venv with ${PY_PACKAGES[*]}"
  python3 -m venv .venv || { rm -rf .venv; python3 -m venv --without-pip .venv; }
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip -q
  .venv/bin/python -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
fi
