#!/usr/bin/env bash
# What naming JavaScript frames keeps in memory: the JavaScript name caches (function names and
# script line tables, JsFrames / V8Namer) after `sonde-agent profile` has named every sampled
# frame of plain node processes for a while. The workload is generated: FILES scripts of
# FUNCS functions each (~6 lines per function), all called round-robin in a busy loop, so
# samples land in many distinct functions of many scripts: a larger spread than most services
# show in one profile. Runs 1 process, then 4 (the budget is shared). Usage:
#   bench/cpu/v8_names.sh [BUILD_DIR] [FILES] [FUNCS] [SECONDS]   (default build 40 100 20; root)
set -euo pipefail
build="${1:-build}"
files="${2:-40}"
funcs="${3:-100}"
seconds="${4:-20}"
port=0
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../agent_lib.sh
source "$here/../agent_lib.sh"

app="$tmp/app"
mkdir -p "$app"
for ((f = 0; f < files; f++)); do
  {
    for ((g = 0; g < funcs; g++)); do
      echo "function work_${f}_${g}(n) {"
      echo "  let s = 0;"
      echo "  for (let i = 0; i < n; i++) s += (i * ${g}) % 7;"
      echo "  return s;"
      echo "}"
      echo
    done
    echo "module.exports = ["
    for ((g = 0; g < funcs; g++)); do echo "  work_${f}_${g},"; done
    echo "];"
  } >"$app/lib_$f.js"
done
cat >"$app/main.js" <<JS
const all = [];
for (let f = 0; f < ${files}; f++) all.push(...require('./lib_' + f + '.js'));
console.log('ready ' + all.length);
let x = 0;
for (;;) for (const fn of all) x += fn(2000);
JS

# measure N: profiles N node processes for `seconds` and prints what the caches keep.
measure() {
  local n="$1" args=()
  for ((i = 0; i < n; i++)); do
    node "$app/main.js" >/dev/null 2>&1 &
    pids+=($!)
    args+=(--pid "$!")
  done
  sleep 2
  "$agent" profile "${args[@]}" --seconds "$seconds" --frequency 99 --output "$tmp/p.pb.gz" \
    2>"$tmp/profile.log"
  local kept named
  kept="$(grep -o 'JavaScript names kept: [0-9]* bytes for [0-9]* node processes' "$tmp/profile.log")"
  # Distinct functions of the generated app that the profile names.
  named="$(go tool pprof -raw "$tmp/p.pb.gz" 2>/dev/null | grep -o 'work_[0-9]*_[0-9]*' | sort -u | wc -l)"
  echo "$n node process(es), ${files}x${funcs} functions, ${seconds} s at 99 Hz:" \
    "$named distinct app functions named; $kept"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
}

measure 1
measure 4
