#!/usr/bin/env bash
# Runs every executable e2e/*_test.sh against the binaries in BUILD/bin (default build/bin).
# Each test gets SONDE_BIN (the bin folder) and a scratch folder in SONDE_E2E_TMP; a test
# prints why it failed and exits non-zero. A test that fails is run once more: passing then, it
# is reported as FLAKY (its first failure stays above in the log) and named in BUILD/flaky.txt,
# which `make test` prints at the end. Ends with the plain 'N passed, N failed' line.
set -uo pipefail
build="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SONDE_BIN="$(cd "$build/bin" && pwd)"
passed=0 failed=0 names=()
# Processes a test left in its cgroups (/sys/fs/cgroup[/unified]/sonde-e2e*): named, killed and
# listed at the end with the flaky tests. A leaked busy loop would load every later test.
reap_leaks() {
  local procs pids
  for procs in $(find /sys/fs/cgroup/sonde-e2e* /sys/fs/cgroup/unified/sonde-e2e* \
    -name cgroup.procs 2>/dev/null); do
    pids="$(tr '\n' ' ' <"$procs")"
    [[ -n "${pids// /}" ]] || continue
    echo "LEAK after $1: processes $pids left in ${procs%/cgroup.procs} (killed)" |
      tee -a "$SONDE_BIN/../flaky.txt"
    for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  done
}
for t in "$root"/e2e/*_test.sh; do
  [[ -x "$t" ]] || continue
  name="$(basename "$t" .sh)"
  result=FAIL
  for attempt in 1 2; do
    export SONDE_E2E_TMP="$(mktemp -d "/tmp/sonde-e2e-$name-XXXXXX")"
    echo "=== e2e: $name$( ((attempt > 1)) && echo " (retry)")"
    start=$(date +%s)
    if "$t"; then
      result=PASS; ((attempt > 1)) && result=FLAKY
    fi
    echo "--- $result $name ($(( $(date +%s) - start ))s)"
    reap_leaks "$name"
    rm -rf "$SONDE_E2E_TMP"
    [[ $result == FAIL ]] || break
  done
  case $result in
    PASS) passed=$((passed + 1)) ;;
    FLAKY) passed=$((passed + 1))
      echo "FLAKY (failed, then passed on its retry): e2e $name" | tee -a "$SONDE_BIN/../flaky.txt" ;;
    *) failed=$((failed + 1)); names+=("$name") ;;
  esac
done
((failed)) && echo "e2e failures: ${names[*]}"
echo "e2e: $passed passed, $failed failed"
((failed == 0))
