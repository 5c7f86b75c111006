# Sourced by the benchmark scripts (from the repository's root).
# release_product NAME VAR: prints the path of Swift product NAME's release build, building it
# first, unless the environment variable VAR names a binary built elsewhere.
release_product() {
  local name=$1 override=${!2:-}
  if [ -n "$override" ]; then echo "$override"; return; fi
  swift build -c release --product "$name" >&2
  echo "$(swift build -c release --show-bin-path)/$name"
}
