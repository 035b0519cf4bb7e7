#!/usr/bin/env bash
# Runs every executable e2e/*_test.sh against the binaries in BUILD/bin (default build/bin).
# Each test gets SONDE_BIN (the bin folder) and a scratch folder in SONDE_E2E_TMP; a test
# prints why it failed and exits non-zero. Ends with the plain 'N passed, N failed' line.
set -uo pipefail
build="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SONDE_BIN="$(cd "$build/bin" && pwd)"
passed=0 failed=0 names=()
for t in "$root"/e2e/*_test.sh; do
  [[ -x "$t" ]] || continue
  name="$(basename "$t" .sh)"
  export SONDE_E2E_TMP="$(mktemp -d "/tmp/sonde-e2e-$name-XXXXXX")"
  echo "=== e2e: $name"
  start=$(date +%s)
  if "$t"; then
    passed=$((passed + 1)); echo "--- PASS $name ($(( $(date +%s) - start ))s)"
  else
    failed=$((failed + 1)); names+=("$name"); echo "--- FAIL $name ($(( $(date +%s) - start ))s)"
  fi
  rm -rf "$SONDE_E2E_TMP"
done
((failed)) && echo "e2e failures: ${names[*]}"
echo "e2e: $passed passed, $failed failed"
((failed == 0))
