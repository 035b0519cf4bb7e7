#!/usr/bin/env bash
# Runs every libFuzzer target registered by sonde_fuzzer() for a bounded time each, starting
# from its seed corpus (copied, so the committed corpus is never modified). Fails on a crash.
set -euo pipefail
build="$1"
seconds="${2:-20}"
list="$build/fuzz-targets.txt"
[[ -f "$list" ]] || { echo "fuzz: $list missing; configure with -DSONDE_BUILD_FUZZ=ON" >&2; exit 1; }
count=0
while IFS='=' read -r name corpus; do
  [[ -z "$name" ]] && continue
  work="$build/fuzz-work/$name"
  rm -rf "$work" && mkdir -p "$work"
  [[ -n "$corpus" && -d "$corpus" ]] && cp -r "$corpus"/. "$work"/
  echo "fuzz: $name for ${seconds}s (corpus: ${corpus:-none})"
  "$build/bin/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$work" 2> "$build/fuzz-work/$name.log" ||
    { tail -50 "$build/fuzz-work/$name.log"; echo "fuzz: $name FAILED" >&2; exit 1; }
  grep -E '^stat::number_of_executed_units' "$build/fuzz-work/$name.log" || true
  count=$((count + 1))
done < "$list"
echo "fuzz: $count targets ran without a crash"
