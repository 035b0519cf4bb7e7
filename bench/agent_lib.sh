# Shared by the agent benchmark scripts (sourced after `build` and `port` are set): a scratch
# folder, the agent started in the background with cleanup on exit, and CPU accounting.
agent="$(cd "$build/bin" && pwd)/sonde-agent"
[[ -x "$agent" ]] || { echo "bench: $agent missing; build first" >&2; exit 1; }
tmp="$(mktemp -d /tmp/sonde-bench-XXXXXX)"
pids=()
agent_pid=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n "$agent_pid" ]] && kill -INT "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# build_gotls OUT [GO_BUILD_FLAGS...]: the Go TLS workload (e2e/workloads/gotls) built offline
# into OUT, as the e2e tests build it (e2e/workloads/go_build.sh).
build_gotls() {
  "$(dirname "${BASH_SOURCE[0]}")/../e2e/workloads/go_build.sh" gotls "$@"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# start_bench_agent [AGENT_ARGS...]
start_bench_agent() {
  "$agent" --standalone --metrics-address "127.0.0.1:$port" --log-level warn "$@" \
    >"$tmp/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/metrics" >/dev/null && return 0; sleep 0.1; done
  cat "$tmp/agent.log" >&2
  echo "bench: the agent did not start" >&2
  exit 1
}

stop_bench_agent() {
  [[ -n "$agent_pid" ]] && kill -INT "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  agent_pid=
}

# CPU ticks (user + system) the agent has used so far.
agent_ticks() { awk '{ print $14 + $15 }' "/proc/$agent_pid/stat"; }
# cpu_percent TICKS0 TICKS1 START_S END_S → percent of one core.
cpu_percent() {
  awk -v a="$1" -v b="$2" -v s="$3" -v e="$4" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", 100 * (b - a) / hz / (e - s) }'
}
agent_rss_mib() {
  curl -sf "127.0.0.1:$port/metrics" |
    awk '/^sonde_agent_resident_memory_bytes / { printf "%.1f", $2 / 1048576 }'
}
