#!/usr/bin/env bash
# The project's version has one source, project(sonde VERSION x.y.z) in CMakeLists.txt (the
# binaries' --version, common/version.h.in): charts/sonde/Chart.yaml's version and appVersion
# must both be it. Prints the version; exits 1 naming the field that differs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want="$(sed -n 's/^project(sonde VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
[[ -n "$want" ]] || { echo "chart-version: no project(sonde VERSION ...) in CMakeLists.txt" >&2; exit 1; }
chart="$root/charts/sonde/Chart.yaml"
for field in version appVersion; do
  got="$(sed -n "s/^$field:[[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}.*/\1/p" "$chart")"
  [[ "$got" == "$want" ]] ||
    { echo "chart-version: $chart $field is '$got', the project version (CMakeLists.txt) is $want" >&2; exit 1; }
done
echo "$want"
