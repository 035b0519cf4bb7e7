#!/usr/bin/env bash
# Runs every libFuzzer target registered by sonde_fuzzer() for a bounded time each, starting
# from its seed corpus (copied, so the committed corpus is never modified). A libFuzzer run uses
# one core, so JOBS of them (default: the number of cores) run at once. Fails on a crash, or on
# an input that runs 60 s (wall time: `make test` runs the fuzzers at the lowest priority beside
# the tests, so a slow input may wait for the CPU many times its own run time).
set -euo pipefail
build="$1"
seconds="${2:-20}"
jobs="${JOBS:-$(nproc)}"
list="$build/fuzz-targets.txt"
[[ -f "$list" ]] || { echo "fuzz: $list missing; configure with -DSONDE_BUILD_FUZZ=ON" >&2; exit 1; }

# One target: prints its line and its executed-units stat; the exit status is the fuzzer's.
run_one() {
  local name="$1" corpus="$2"
  local work="$build/fuzz-work/$name" log="$build/fuzz-work/$name.log"
  rm -rf "$work" && mkdir -p "$work"
  if [[ -n "$corpus" && -d "$corpus" ]]; then cp -r "$corpus"/. "$work"/; fi
  if "$build/bin/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=60 \
    -print_final_stats=1 "$work" 2> "$log"; then
    echo "fuzz: $name for ${seconds}s (corpus: ${corpus:-none}):" \
      "$(grep -E '^stat::number_of_executed_units' "$log" || echo 'no stats')"
  else
    tail -50 "$log"
    echo "fuzz: $name FAILED (log: $log)" >&2
    return 1
  fi
}

count=0 failed=0 running=0
while IFS='=' read -r name corpus; do
  [[ -z "$name" ]] && continue
  if ((running >= jobs)); then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
  run_one "$name" "$corpus" </dev/null &
  running=$((running + 1)) count=$((count + 1))
done < "$list"
while ((running > 0)); do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
((failed == 0)) || { echo "fuzz: $failed of $count targets FAILED" >&2; exit 1; }
echo "fuzz: $count targets ran without a crash ($jobs at a time)"
