#!/usr/bin/env bash
# What naming JavaScript frames from the V8 heap costs: the sampler program's kernel time per
# sample (bpf_stats: run_time_ns / run_cnt) for node processes, whose frames it walks, against
# C processes, whose it does not; and the `sonde-agent profile` process's own CPU while it
# names every drain's JavaScript frames (a profile in progress the whole time), at 19 and 99 Hz.
# Two plain node processes (no flag) block their loops in JavaScript, 200 ms of every 250 ms,
# allocating (GC churn). Usage: bench/cpu/v8.sh [BUILD_DIR] (default build; needs root and
# bpftool).
set -euo pipefail
build="${1:-build}"
port=0
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../agent/cpu/tests"
# shellcheck source=../agent_lib.sh
source "$here/../agent_lib.sh"

stats_before="$(sysctl -n kernel.bpf_stats_enabled)"
sysctl -qw kernel.bpf_stats_enabled=1
trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_before"; cleanup' EXIT

cc -O0 -g -fno-omit-frame-pointer -o "$tmp/hot_c" "$src/hot_c.c"
spawn() { "$@" >/dev/null 2>&1 & pids+=($!); }

# run_stats: "run_time_ns run_cnt" of the newest perf_event program named `sample` (the
# agent's: bpftool here cannot list a program's pids).
run_stats() {
  bpftool -j prog show | python3 -c '
import json, sys
progs = [p for p in json.load(sys.stdin) if p.get("name") == "sample"]
p = max(progs, key=lambda p: p["id"]) if progs else {}
print(p.get("run_time_ns", 0), p.get("run_cnt", 0))'
}

measure_s=30
# measure WORKLOAD HZ PID...: over measure_s seconds of steady state (after 5 s of start-up).
measure() {
  local workload="$1" hz="$2"
  shift 2
  local args=()
  for p in "$@"; do args+=(--pid "$p"); done
  "$agent" profile "${args[@]}" --seconds $((measure_s + 10)) --frequency "$hz" \
    --output "$tmp/p.pb.gz" 2>"$tmp/profile.log" &
  agent_pid=$!
  sleep 5
  read -r ns0 n0 < <(run_stats)
  t0="$(agent_ticks)"; s0="$(date +%s.%N)"
  sleep "$measure_s"
  t1="$(agent_ticks)"; s1="$(date +%s.%N)"
  read -r ns1 n1 < <(run_stats)
  wait "$agent_pid"; agent_pid=
  local per=0
  (( n1 > n0 )) && per=$(( (ns1 - ns0) / (n1 - n0) ))
  echo "${workload}, ${hz} Hz: sampler ${per} ns per sample ($((n1 - n0)) samples);" \
    "agent $(cpu_percent "$t0" "$t1" "$s0" "$s1")% of one core" \
    "($(grep -o 'profile: [0-9]* samples, [0-9]* distinct stacks' "$tmp/profile.log"))"
}

spawn "$tmp/hot_c"
spawn "$tmp/hot_c"
for hz in 19 99; do measure "2 C hot loops (no V8 walk)" "$hz" "${pids[@]}"; done
for p in "${pids[@]}"; do kill "$p"; done
pids=()

# node writes nothing to its working directory without flags; churn: the GC moves objects.
spawn node "$src/js_burn.js" churn
spawn node "$src/js_burn.js" churn
sleep 1
for hz in 19 99; do measure "2 plain node, blocked in JavaScript (V8 walk + naming)" "$hz" "${pids[@]}"; done
