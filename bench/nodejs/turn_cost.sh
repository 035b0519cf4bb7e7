#!/usr/bin/env bash
# Kernel time per run of the Node.js wait hook's programs, per --nodejs-metrics set: what each
# loop turn of an instrumented process pays in BPF, measured by the kernel's own BPF statistics
# (run_time_ns / run_cnt per program, kernel.bpf_stats_enabled, set for the run and restored),
# so load on the machine does not blur it the way wall-clock iteration timings are blurred.
# Usage: bench/nodejs/turn_cost.sh [BUILD_DIR] [RUNS]   (root; prints a Markdown table)
# Sets interleaved (sonde, both, sonde, both, ...): sonde = the kernel keeps blocked time only
# (as before OpenTelemetry's metrics), both = idle time and the simulated 10 ms timer too.
set -euo pipefail
build="${1:-build}"
runs="${2:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
stats_before="$(cat /proc/sys/kernel/bpf_stats_enabled)"
restore_stats() { echo "$stats_before" >/proc/sys/kernel/bpf_stats_enabled; cleanup; }
trap restore_stats EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled

measure_s=5
# ns and runs of the agent's wait programs (entry and exit) so far, summed: the programs behind
# the agent's own BPF descriptors (other agents on the machine have programs of the same names).
prog_stats() {
  local ids
  ids="$(cat /proc/"$agent_pid"/fdinfo/* 2>/dev/null | awk '$1 == "prog_id:" { print $2 }' | sort -u)"
  for id in $ids; do bpftool -j prog show id "$id"; echo; done | jq -rs '
    [.[] | select(.name | test("^(libc_wait_enter|libc_wait_exit|epoll_wait_enter|epoll_wait_exit)$"))]
    | "\(map(.run_time_ns // 0) | add // 0) \(map(.run_cnt // 0) | add // 0) \(map(.name) | join("+"))"'
}
echo "| --nodejs-metrics | programs | runs | ns per run |"
echo "|---|---|---|---|"
# One process turning its loop all the time (setImmediate chains), selected once per agent.
node -e 'const f = () => setImmediate(f); f();' &
pids+=($!)
for _ in $(seq "$runs"); do
  for set in sonde both; do
    start_bench_agent --nodejs-metrics "$set"
    for _ in $(seq 100); do
      curl -sf "127.0.0.1:$port/metrics" | grep -q '^sonde_agent_nodejs_processes{.*} 1$' && break
      sleep 0.1
    done
    sleep 1
    read -r t0 c0 _ <<<"$(prog_stats)"
    sleep "$measure_s"
    read -r t1 c1 names <<<"$(prog_stats)"
    awk -v s="$set" -v p="$names" -v t=$((t1 - t0)) -v c=$((c1 - c0)) \
      'BEGIN { printf "| %s | %s | %d | %.1f |\n", s, p, c, c ? t / c : 0 }'
    kill -INT "$agent_pid"; wait "$agent_pid" 2>/dev/null || true; agent_pid=
  done
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); ${measure_s} s of a setImmediate loop per row"
