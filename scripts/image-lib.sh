# Shared by scripts/image.sh and e2e/image_test.sh (source it).

# The container engine: $SONDE_ENGINE, else podman, else a docker whose daemon answers.
image_engine() {
  if [[ -n "${SONDE_ENGINE:-}" ]]; then
    echo "$SONDE_ENGINE"
  elif command -v podman >/dev/null; then
    echo podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    echo docker
  else
    echo "image: no container engine: install podman ('make deps') or start docker" >&2
    return 1
  fi
}

# localhost/sonde:<appVersion>: what the chart installs by default.
image_ref() {
  local chart
  chart="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/charts/sonde/Chart.yaml"
  local version
  version="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$chart")"
  [[ -n "$version" ]] || { echo "image: no appVersion in $chart" >&2; return 1; }
  echo "localhost/sonde:$version"
}

# Flags for `ENGINE build` and `ENGINE run` on this machine. podman: runc (crun rejects hybrid
# cgroups such as this VM's) and the ulimits of DESIGN.md's recipe, lowered to this shell's
# hard limits (podman's defaults exceed what such a VM grants, and every container then fails
# to start; so did nproc at this shell's own hard limit).
image_engine_flags() {
  [[ "$1" == podman ]] || return 0
  if command -v runc >/dev/null; then printf '%s\n' --runtime runc; fi
  local nofile=20000 nproc=32768 hard
  hard="$(ulimit -Hn)"
  [[ "$hard" == unlimited ]] || ((hard >= nofile)) || nofile="$hard"
  hard="$(ulimit -Hu)"
  [[ "$hard" == unlimited ]] || ((hard >= nproc)) || nproc="$hard"
  echo "--ulimit=nofile=$nofile:$nofile"
  echo "--ulimit=nproc=$nproc:$nproc"
}
