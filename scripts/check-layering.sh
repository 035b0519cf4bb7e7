#!/usr/bin/env bash
# The runtime (agent/runtime/) drives features through Feature alone: none of its sources
# includes a feature folder's header (a folder under agent/ with a *_feature.h). Only the
# composition root (agent/assembly/) names features. Run by ctest (test `layering`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
features=$(ls agent/*/*_feature.h | xargs -n1 dirname | sort -u)
[[ -n "$features" ]] || { echo "layering: no feature folders found" >&2; exit 1; }
bad=0
while IFS= read -r line; do
  file=${line%%:*}
  inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
  for f in $features; do
    if [[ "$inc" == "$f/"* ]]; then
      echo "layering: $file includes $inc (feature folder $f); only agent/assembly/ may" >&2
      bad=1
    fi
  done
done < <(grep -H '#include "agent/' $(git ls-files 'agent/runtime/*.h' 'agent/runtime/*.cpp' | grep -v '/tests/') || true)
((bad == 0)) && echo "layering: agent/runtime/ includes no feature folder ($(echo $features | wc -w) feature folders)"
exit $bad
