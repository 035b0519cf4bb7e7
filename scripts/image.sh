#!/usr/bin/env bash
# `make image`: builds the container image with podman or docker (whichever works here; set
# SONDE_ENGINE to choose), tagged localhost/sonde:<appVersion of charts/sonde/Chart.yaml>, the
# chart's default image. Also copies the binaries' debug information (by build id) out to
# build/image/debug. With podman and no debian:12 base image, scripts/image-base.sh makes the
# base images locally first. Prints the image reference on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/image-lib.sh"

engine="$(image_engine)" || exit 1
tag="$(image_ref)"
mapfile -t args < <(image_engine_flags "$engine")
# With podman, local base images when none exist: no registry needed.
if [[ "$engine" == podman ]]; then "$root/scripts/image-base.sh"; fi

start=$(date +%s)
echo "image: $engine build -t $tag"
"$engine" build "${args[@]}" -t "$tag" "$root"
"$engine" build "${args[@]}" --target debug -t "$tag-debug" "$root" >/dev/null
echo "image: built in $(($(date +%s) - start)) s"

debug_dir="$root/build/image/debug"
rm -rf "$debug_dir"
mkdir -p "$debug_dir"
container="$("$engine" create "$tag-debug" /none)"
"$engine" cp "$container:/usr/lib/debug/." "$debug_dir"
"$engine" rm "$container" >/dev/null
echo "image: debug information in ${debug_dir#"$root"/}: $(cd "$debug_dir" && find . -name '*.debug' | sort | tr '\n' ' ')"
echo "image: $("$engine" image inspect --format '{{.Size}}' "$tag" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
echo "$tag"
