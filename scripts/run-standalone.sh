#!/usr/bin/env bash
# `make run`: the agent standalone on this host (root) with a demo Node.js workload that blocks
# its event loop for 200 ms every second, printing the agent's metric as it moves.
# DEMO_SECONDS (default 20) bounds the demo; SONDE_METRICS_ADDRESS (default 127.0.0.1:9464).
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
agent="$build/bin/sonde-agent"
address="${SONDE_METRICS_ADDRESS:-127.0.0.1:9464}"
seconds="${DEMO_SECONDS:-20}"
log="$(mktemp /tmp/sonde-agent-XXXXXX.log)"

if [[ $(id -u) -ne 0 ]]; then
  echo "run: the agent loads BPF programs; run as root (or grant CAP_BPF, CAP_PERFMON, ...)" >&2
  exit 1
fi
echo "== sonde-agent doctor"
"$agent" doctor || { echo "run: doctor found failures (above); not starting" >&2; exit 1; }

echo "== sonde-agent --standalone --metrics-address $address   (log: $log)"
"$agent" --standalone --metrics-address "$address" >"$log" 2>&1 &
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

demo_dir="$(mktemp -d /tmp/sonde-demo-XXXXXX)"
ln -s /usr/bin/node "$demo_dir/node-demo"
echo "== demo workload: node-demo blocks its event loop 200 ms every second"
"$demo_dir/node-demo" "$root/e2e/workloads/blocker.js" periodic 0 200 >/dev/null &
demo_pid=$!

echo "== container_nodejs_event_loop_blocked_time_seconds_total{container=\"node-demo\"} (expect +0.2 per second)"
for ((i = 0; i < seconds; i += 2)); do
  sleep 2
  value="$(curl -sf "http://$address/metrics" |
    awk '/^container_nodejs_event_loop_blocked_time_seconds_total\{.*container="node-demo"/ { print $2 }')"
  printf '  t=%2ds  %s s\n' "$((i + 2))" "${value:-(not yet)}"
done
echo "== agent self-metrics"
curl -sf "http://$address/metrics" | grep -E '^sonde_agent_(uprobe_attachments|nodejs_binaries|symbol_cache_parses_total|resident_memory_bytes)[ {]'
rm -rf "$demo_dir"
