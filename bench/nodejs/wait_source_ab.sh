#!/usr/bin/env bash
# getppid() and epoll_wait(0) of a process the agent does not select (dynamically linked: it
# maps the same libc.so.6 file as the selected node), interleaved A/B over wait sources: no
# agent, then the agent with each --wait-source given, for ROUNDS rounds; one idle node process
# is selected throughout (hooks attached per selected process are then in place).
# Usage: bench/nodejs/wait_source_ab.sh [BUILD_DIR] [ROUNDS] [SOURCE...]   (root)
#   default: build 2 auto epoll-tracepoints
set -euo pipefail
build="${1:-build}"
rounds="${2:-2}"
shift $(($# < 2 ? $# : 2))
sources=("$@")
if [[ ${#sources[@]} -eq 0 ]]; then sources=(auto epoll-tracepoints); fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
cc -O2 -o "$tmp/syscalls" "$here/syscalls.c"
median_ns() { for _ in $(seq 7); do "$tmp/syscalls" 2000000 "${1:-getppid}"; done | median; }
# Syscall-tracepoint programs loaded on the node now, the bench's agent's or anyone else's (a
# second agent or tool): any of them taxes every system call, so a "none" or "auto" row taken
# while one is loaded is not a baseline.
tracepoint_progs() {
  bpftool prog show 2>/dev/null |
    grep -cE 'name (epoll_(wait|pwait|pwait2)(_exit)?_event|sys_(enter|exit)_wait) ' || true
}
row() {  # round, source: the agent's hook as it reports it, the two medians, tracepoint programs
  local hook=none
  if [[ "$2" != none ]]; then
    hook="$(curl -sf "127.0.0.1:$port/metrics" |
      sed -n 's/^sonde_agent_info{.*wait_source="\([^"]*\)".*/\1/p')"
  fi
  local before after ppid epoll
  before="$(tracepoint_progs)"
  ppid="$(median_ns)"
  epoll="$(median_ns epoll)"
  after="$(tracepoint_progs)"
  echo "| $1 | $2 | $hook | $ppid ns | $epoll ns | $before / $after |"
}

node "$here/../../e2e/workloads/blocker.js" idle 0 0 >/dev/null 2>&1 &
pids+=($!)
echo "| round | --wait-source | hook | getppid() | epoll_wait(0) | syscall-tracepoint programs loaded (before / after) |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  row "$round" none
  for src in "${sources[@]}"; do
    start_bench_agent --wait-source "$src"
    sleep 3  # the idle node process is selected
    row "$round" "$src"
    stop_bench_agent
  done
done
echo
echo "median of 7 runs of 2,000,000 calls each; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
