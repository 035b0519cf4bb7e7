#!/usr/bin/env bash
# What the Node.js stall sampler costs (nodejsEventLoop.stallThresholdMs): the kernel time of its
# perf-event program (kernel.bpf_stats_enabled: run count and run time of `stall_sample`) and the
# agent's own CPU, over MEASURE_S seconds, in three cases with one watched /usr/bin/node:
#   baseline   no threshold: the sampler is not loaded (the agent's CPU for comparison)
#   no stall   threshold 100 ms, the process's loop idle (a timer every 100 ms): every sample of
#              every CPU returns at the filter
#   stalling   threshold 100 ms, the loop blocked 200 ms of every 250 ms: samples recorded,
#              stalls symbolized and kept
# Usage: bench/nodejs/stalls.sh [BUILD_DIR] (default build; needs root).
set -euo pipefail
build="${1:-build}"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
here="$(cd "$(dirname "$0")" && pwd)"
workload="$here/../../e2e/workloads/stall.js"
# shellcheck source=../agent_lib.sh
source "$here/../agent_lib.sh"
measure_s="${MEASURE_S:-20}"
stats_before="$(sysctl -n kernel.bpf_stats_enabled)"
restore_stats() { sysctl -qw kernel.bpf_stats_enabled="$stats_before"; cleanup; }
trap restore_stats EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# run_time_ns run_cnt of the newest stall_sample program loaded after the agent started (its
# own: bpftool here lists no owner pids), 0 0 when none.
prog_stats() {
  bpftool prog show -j | python3 -c "
import json, sys
mine = [p for p in json.load(sys.stdin)
        if p.get('name') == 'stall_sample' and p.get('loaded_at', 0) >= $agent_started]
p = max(mine, key=lambda p: p['id']) if mine else {}
print(p.get('run_time_ns', 0), p.get('run_cnt', 0))"
}

# measure LABEL THRESHOLD_MS|none WORKLOAD_ARGS...
measure() {
  local label="$1" threshold="$2"
  shift 2
  if [[ "$threshold" == none ]]; then
    printf 'targets: [{exe: "/usr/bin/node*"}]\ninstrumentations: {nodejsEventLoop: true, goTLS: false}\n' >"$tmp/agent.yaml"
  else
    printf 'targets: [{exe: "/usr/bin/node*"}]\ninstrumentations: {nodejsEventLoop: {stallThresholdMs: %s}, goTLS: false}\n' "$threshold" >"$tmp/agent.yaml"
  fi
  agent_started="$(date +%s)"
  start_bench_agent --config "$tmp/agent.yaml"
  /usr/bin/node "$workload" "$@" >"$tmp/node.out" 2>&1 &
  local node=$!
  sleep 3  # instrumented, sampler loaded, first rounds done
  local t0 s0 r0 c0 t1 s1 r1 c1 stalls
  t0="$(agent_ticks)"; s0="$(date +%s.%N)"; read -r r0 c0 < <(prog_stats)
  sleep "$measure_s"
  t1="$(agent_ticks)"; s1="$(date +%s.%N)"; read -r r1 c1 < <(prog_stats)
  stalls="$(curl -sf "127.0.0.1:$port/metrics" | awk '/^sonde_agent_nodejs_stalls_total / { print $2 }')"
  kill "$node" 2>/dev/null || true
  wait "$node" 2>/dev/null || true
  stop_bench_agent
  awk -v l="$label" -v r="$((r1 - r0))" -v c="$((c1 - c0))" -v s0="$s0" -v s1="$s1" \
    -v cpu="$(cpu_percent "$t0" "$t1" "$s0" "$s1")" -v n="${stalls:-0}" 'BEGIN {
      wall = (s1 - s0) * 1e9
      printf "| %s | %d | %s | %.4f | %s | %s |\n", l, c, (c ? sprintf("%.0f", r / c) : "-"),
        100 * r / wall, cpu, n }'
}

echo "| case | stall_sample runs | ns per run | program CPU (% of one core) | agent CPU (% of one core) | stalls |"
echo "|---|---|---|---|---|---|"
measure "baseline (no threshold)" none idle 0 0 100
measure "no stall (loop idle)" 100 idle 0 0 100
measure "stalling (200 ms of every 250 ms)" 100 stall 0 200 250
