#!/usr/bin/env bash
# `make run`: the agent standalone on this host (root) with a demo Node.js workload that blocks
# its event loop for 200 ms every second, printing the agent's metric as it moves. With
# DEMO=threadpool, the agent also reads libuv's thread pool (nodejsThreadPool, off by default)
# and the demo saturates it: every second 16 crypto.pbkdf2 calls on a pool of 4 threads, so tasks
# queue and the pool's saturated seconds grow.
# DEMO_SECONDS (default 20) bounds the demo; SONDE_METRICS_ADDRESS (default 127.0.0.1:9464).
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
agent="$build/bin/sonde-agent"
address="${SONDE_METRICS_ADDRESS:-127.0.0.1:9464}"
seconds="${DEMO_SECONDS:-20}"
demo="${DEMO:-eventloop}"
[[ $demo == eventloop || $demo == threadpool ]] ||
  { echo "run: DEMO=$demo: eventloop (the default) or threadpool" >&2; exit 2; }
log="$(mktemp /tmp/sonde-agent-XXXXXX.log)"

if [[ $(id -u) -ne 0 ]]; then
  echo "run: the agent loads BPF programs; run as root (or grant CAP_BPF, CAP_PERFMON, ...)" >&2
  exit 1
fi
echo "== sonde-agent doctor"
"$agent" doctor || { echo "run: doctor found failures (above); not starting" >&2; exit 1; }

demo_dir="$(mktemp -d /tmp/sonde-demo-XXXXXX)"
args=(--standalone --metrics-address "$address")
if [[ $demo == threadpool ]]; then
  # The embedded default with the thread pool asked for as well.
  printf 'instrumentations:\n  nodejsEventLoop: true\n  nodejsThreadPool: true\n' >"$demo_dir/agent.yaml"
  args+=(--config "$demo_dir/agent.yaml")
fi
echo "== sonde-agent ${args[*]}   (log: $log)"
"$agent" "${args[@]}" >"$log" 2>&1 &
agent_pid=$!
demo_pid=
cleanup() {
  [[ -n "$demo_pid" ]] && kill "$demo_pid" 2>/dev/null || true
  kill -INT "$agent_pid" 2>/dev/null || true
  wait "$agent_pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do curl -sf "http://$address/metrics" >/dev/null && break; sleep 0.1; done
curl -sf "http://$address/metrics" >/dev/null || { cat "$log"; echo "run: agent did not start" >&2; exit 1; }

ln -s /usr/bin/node "$demo_dir/node-demo"
# value METRIC: the demo container's sample of METRIC, "(not yet)" while there is none.
value() {
  curl -sf "http://$address/metrics" |
    awk -v m="$1" 'index($0, m "{") == 1 && /container="node-demo"/ { v = $2 } END { print v == "" ? "(not yet)" : v }'
}
if [[ $demo == threadpool ]]; then
  echo "== demo workload: node-demo runs 16 crypto.pbkdf2 every second on 4 pool threads"
  UV_THREADPOOL_SIZE=4 "$demo_dir/node-demo" -e '
    const crypto = require("crypto");
    setInterval(() => {
      for (let i = 0; i < 16; i++) crypto.pbkdf2("secret", "salt", 200000, 32, "sha256", () => {});
    }, 1000);' >/dev/null &
  demo_pid=$!
  echo "== container_nodejs_threadpool_* {container=\"node-demo\"} (saturated seconds grow; tasks queue)"
  for ((i = 0; i < seconds; i += 2)); do
    sleep 2
    printf '  t=%2ds  saturated %s s, busy threads %s, queued tasks %s\n' "$((i + 2))" \
      "$(value container_nodejs_threadpool_saturated_seconds_total)" \
      "$(value container_nodejs_threadpool_busy_threads)" "$(value container_nodejs_threadpool_queued_tasks)"
  done
else
  echo "== demo workload: node-demo blocks its event loop 200 ms every second"
  "$demo_dir/node-demo" "$root/e2e/workloads/blocker.js" periodic 0 200 >/dev/null &
  demo_pid=$!
  echo "== container_nodejs_event_loop_blocked_time_seconds_total{container=\"node-demo\"} (expect +0.2 per second)"
  for ((i = 0; i < seconds; i += 2)); do
    sleep 2
    printf '  t=%2ds  %s s\n' "$((i + 2))" "$(value container_nodejs_event_loop_blocked_time_seconds_total)"
  done
fi
echo "== agent self-metrics"
curl -sf "http://$address/metrics" | grep -E '^sonde_agent_(uprobe_attachments|nodejs_binaries|nodejs_threadpool_binaries|symbol_cache_parses_total|resident_memory_bytes)[ {]'
rm -rf "$demo_dir"
