#!/usr/bin/env bash
# getppid() of a process the agent does not select, interleaved A/B over wait sources: no
# agent, then the agent with each --wait-source given, for ROUNDS rounds; one idle node process
# is selected throughout (hooks attached per selected process are then in place).
# Usage: bench/nodejs/wait_source_ab.sh [BUILD_DIR] [ROUNDS] [SOURCE...]   (root)
#   default: build 2 libc-uprobes epoll-tracepoints
set -euo pipefail
build="${1:-build}"
rounds="${2:-2}"
shift $(($# < 2 ? $# : 2))
sources=("$@")
if [[ ${#sources[@]} -eq 0 ]]; then sources=(libc-uprobes epoll-tracepoints); fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
cc -O2 -o "$tmp/syscalls" "$here/syscalls.c"
median_ns() { for _ in $(seq 7); do "$tmp/syscalls" 2000000 getppid; done | median; }

node "$here/../../e2e/workloads/blocker.js" idle 0 0 >/dev/null 2>&1 &
pids+=($!)
echo "| round | wait source | getppid() |"
echo "|---|---|---|"
for round in $(seq "$rounds"); do
  echo "| $round | none | $(median_ns) ns |"
  for src in "${sources[@]}"; do
    start_bench_agent --wait-source "$src"
    sleep 3  # the idle node process is selected
    echo "| $round | $src | $(median_ns) ns |"
    stop_bench_agent
  done
done
echo
echo "median of 7 runs of 2,000,000 calls each; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
