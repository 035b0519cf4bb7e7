#!/bin/sh
# Strips release binaries and keeps their debug information beside them, filed by GNU build id
# the way gdb, eu-stack and debuginfod look it up: OUT/.build-id/ab/cdef....debug. The stripped
# binary keeps its build id, so a crash's stack from the image symbolizes against the matching
# debug file. Usage: scripts/split-debug.sh OUT BINARY...
set -eu
out="$1"
shift
for bin in "$@"; do
  id="$(readelf -n "$bin" | awk '/Build ID:/ { print $3 }')"
  if [ -z "$id" ]; then
    echo "split-debug: $bin has no GNU build id" >&2
    exit 1
  fi
  dir="$out/.build-id/$(echo "$id" | cut -c1-2)"
  debug="$dir/$(echo "$id" | cut -c3-).debug"
  mkdir -p "$dir"
  objcopy --only-keep-debug --compress-debug-sections=zlib "$bin" "$debug"
  strip --strip-all "$bin"
  echo "split-debug: $(basename "$bin") build id $id -> $debug"
done
