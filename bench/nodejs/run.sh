#!/usr/bin/env bash
# Node.js event-loop instrumentation costs, with the release agent (make build):
#   1. added cost per event-loop iteration of an instrumented process (ns);
#   2. added cost per system call of any process on the node (getppid: only the raw syscall
#      tracepoints see it) and per epoll wait of a process that is not Node.js (every hook);
#   3. the agent's CPU and RSS while 50 node processes are instrumented.
# Usage: bench/nodejs/run.sh [BUILD_DIR] [WAIT_SOURCE] [NODEJS_METRICS]   (root; prints a
# Markdown table)
#   WAIT_SOURCE: the agent's --wait-source (default: the agent's own default, auto)
#   NODEJS_METRICS: the agent's --nodejs-metrics (default both; sonde: the kernel keeps no idle
#   time and no simulated timer, the cost per turn before OpenTelemetry's metrics)
# The system calls are timed with and without the agent while one node process (idle in its
# loop) is selected: a hook attached per selected process (libc-uprobes) is then in place.
set -euo pipefail
build="${1:-build}"
wait_source_flag=()
if [[ -n "${2:-}" ]]; then wait_source_flag=(--wait-source "$2"); fi
if [[ -n "${3:-}" ]]; then wait_source_flag+=(--nodejs-metrics "$3"); fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19499
source "$here/../agent_lib.sh"
cc -O2 -o "$tmp/syscalls" "$here/syscalls.c"

iterations=200000
runs=7
loop_ns() {  # median ns per iteration over $runs runs
  for _ in $(seq $runs); do
    node "$here/loop_iterations.js" $iterations
  done | awk -v n=$iterations '{ print $1 / n }' | median
}
syscall_ns() { for _ in $(seq $runs); do "$tmp/syscalls" 2000000 "${1:-getppid}"; done | median; }

load0="$(cut -d' ' -f1-3 /proc/loadavg)"
# The selected node process: idle in its loop for the whole run, with and without the agent.
node "$here/../../e2e/workloads/blocker.js" idle 0 0 >/dev/null 2>&1 &
pids+=($!)
base_loop="$(loop_ns)"
base_sys="$(syscall_ns)"
base_epoll="$(syscall_ns epoll)"

start_bench_agent "${wait_source_flag[@]}"
sleep 2  # the idle node process is selected
wait_source="$(curl -sf "127.0.0.1:$port/metrics" | sed -n 's/^sonde_agent_info{.*wait_source="\([^"]*\)".*/\1/p')"
agent_loop="$(loop_ns)"
agent_sys="$(syscall_ns)"
agent_epoll="$(syscall_ns epoll)"

# 50 more instrumented node processes, each running 20 ms of work every second.
for i in $(seq 50); do
  node "$here/../../e2e/workloads/blocker.js" periodic 0 20 >/dev/null 2>&1 &
  pids+=($!)
done
sleep 5
t0="$(agent_ticks)"; s0="$(date +%s.%N)"
sleep 30
t1="$(agent_ticks)"; s1="$(date +%s.%N)"
cpu="$(cpu_percent "$t0" "$t1" "$s0" "$s1")"
metrics="$(curl -sf "127.0.0.1:$port/metrics")"
rss="$(agent_rss_mib)"
procs="$(awk '/^sonde_agent_nodejs_processes\{/ { s += $2 } END { print s }' <<<"$metrics")"
libs="$(awk '/^sonde_agent_nodejs_wait_hook_libraries\{/ { n++ } END { print n + 0 }' <<<"$metrics")"

cat <<TABLE
| measure | without agent | with agent | added |
|---|---|---|---|
| event-loop iteration (setImmediate, instrumented process) | $(printf %.0f "$base_loop") ns | $(printf %.0f "$agent_loop") ns | $(awk -v a="$agent_loop" -v b="$base_loop" 'BEGIN { printf "%.0f ns", a - b }') |
| getppid() system call (any process) | $base_sys ns | $agent_sys ns | $(awk -v a="$agent_sys" -v b="$base_sys" 'BEGIN { printf "%.1f ns", a - b }') |
| epoll_wait(timeout 0), a process that is not Node.js | $base_epoll ns | $agent_epoll ns | $(awk -v a="$agent_epoll" -v b="$base_epoll" 'BEGIN { printf "%.1f ns", a - b }') |

wait hook: $wait_source; --nodejs-metrics ${3:-both}; median of $runs runs of $iterations iterations / 2,000,000 calls; load
average at the start and end: $load0 / $(cut -d' ' -f1-3 /proc/loadavg).

| 50 instrumented node processes (20 ms of work per second each) | value |
|---|---|
| processes instrumented | $procs |
| C library files hooked (libc-uprobes only) | $libs |
| agent CPU (30 s average) | $cpu % of one core |
| agent RSS | $rss MiB |
TABLE
