#!/usr/bin/env bash
# Runs every executable e2e/*_test.sh against the binaries in BUILD/bin (default build/bin).
# Each test gets SONDE_BIN (the bin folder) and a scratch folder in SONDE_E2E_TMP; a test
# prints why it failed and exits non-zero. A test that fails is run once more: passing then, it
# is reported as FLAKY (its first failure stays above in the log) and named in BUILD/flaky.txt,
# which `make test` prints at the end. Ends with the plain 'N passed, N failed' line.
#
# Two lanes. A test whose header says `# e2e-lane: beside` starts no workload, creates no cgroup
# and times nothing on the host (the tests of the agent's API-facing side): those run one after
# another beside the others, and their output is printed when the lane is done. Every other
# test runs alone in the main lane, where the processes a test left in the e2e cgroups
# (/sys/fs/cgroup[/unified]/sonde-e2e*) are named, killed and listed with the flaky tests: a
# leaked busy loop would load every later test.
set -uo pipefail
build="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SONDE_BIN="$(cd "$build/bin" && pwd)"
flaky="$SONDE_BIN/../flaky.txt"

reap_leaks() {
  local procs pids
  for procs in $(find /sys/fs/cgroup/sonde-e2e* /sys/fs/cgroup/unified/sonde-e2e* \
    -name cgroup.procs 2>/dev/null); do
    pids="$(tr '\n' ' ' <"$procs")"
    [[ -n "${pids// /}" ]] || continue
    echo "LEAK after $1: processes $pids left in ${procs%/cgroup.procs} (killed)" | tee -a "$flaky"
    for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  done
}

# run_test FILE RESULTS [reap]: runs one test (twice if it fails once) and appends
# "PASS|FLAKY|FAIL name" to RESULTS.
run_test() {
  local t="$1" results="$2" reap="${3:-}" name result attempt start
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
    [[ -n "$reap" ]] && reap_leaks "$name"
    rm -rf "$SONDE_E2E_TMP"
    [[ $result == FAIL ]] || break
  done
  [[ $result == FLAKY ]] &&
    echo "FLAKY (failed, then passed on its retry): e2e $name" | tee -a "$flaky"
  echo "$result $name" >>"$results"
}

main=() beside=()
for t in "$root"/e2e/*_test.sh; do
  [[ -x "$t" ]] || continue
  if grep -q '^# e2e-lane: beside\b' "$t"; then beside+=("$t"); else main+=("$t"); fi
done
results="$(mktemp /tmp/sonde-e2e-results-XXXXXX)"
beside_log="$(mktemp /tmp/sonde-e2e-beside-XXXXXX)"
(for t in "${beside[@]}"; do run_test "$t" "$results"; done) >"$beside_log" 2>&1 &
beside_pid=$!
for t in "${main[@]}"; do run_test "$t" "$results" reap; done
wait "$beside_pid"
echo "=== e2e: the beside lane (${#beside[@]} tests), as it ran"
cat "$beside_log"
passed="$(grep -c -E '^(PASS|FLAKY) ' "$results")"
failed="$(grep -c '^FAIL ' "$results")"
((failed)) && echo "e2e failures: $(awk '/^FAIL / { printf "%s ", $2 }' "$results")"
rm -f "$results" "$beside_log"
echo "e2e: $passed passed, $failed failed"
((failed == 0))
