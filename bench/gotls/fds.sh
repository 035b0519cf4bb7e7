#!/usr/bin/env bash
# Descriptors the agent holds per instrumented Go binary: BINARIES distinct Go TLS servers
# (copies of one build with distinct trailers: another inode each, so another file for the
# agent and the kernel), the agent's /proc/<pid>/fd counted before the first starts and once all
# are tracked. The agent is from BUILD_DIR (default build); its uprobe link kind is in its log.
# Usage: bench/gotls/fds.sh [BUILD_DIR] [BINARIES]   (root; prints a Markdown table row)
set -euo pipefail
build="${1:-build}"
binaries="${2:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19497
source "$here/../agent_lib.sh"
source "$here/../../e2e/lib.sh"  # gotls_only_config
build_gotls "$tmp/gotls"
mkdir -p "$tmp/bin"
for i in $(seq "$binaries"); do
  cp "$tmp/gotls" "$tmp/bin/gtls-$i"
  printf 'variant %d\n' "$i" >>"$tmp/bin/gtls-$i"
done
gotls_only_config "$tmp/agent.yaml" "$tmp/bin/gtls-*"
"$agent" --standalone --config "$tmp/agent.yaml" --metrics-address "127.0.0.1:$port" \
  >"$tmp/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/metrics" >/dev/null && break; sleep 0.1; done
sleep 1
before="$(ls "/proc/$agent_pid/fd" | wc -l)"
for i in $(seq "$binaries"); do
  "$tmp/bin/gtls-$i" server >"$tmp/server-$i.out" 2>&1 &
  pids+=($!)
done
tracked() {
  [[ "$(curl -sf "127.0.0.1:$port/metrics" | grep -c '^sonde_agent_gotls_processes{.*} 1$')" == "$binaries" ]]
}
for _ in $(seq 600); do tracked && break; sleep 0.1; done
tracked || { echo "bench: not every server was instrumented" >&2; exit 1; }
after="$(ls "/proc/$agent_pid/fd" | wc -l)"
links="$(grep -o 'links=[a-z_]*' "$tmp/agent.log" || echo 'links=single (agent before uprobe_multi)')"
echo "| ${links#links=} | $binaries | $before | $after | $(awk -v d=$((after - before)) -v n="$binaries" 'BEGIN { printf "%.2f", d / n }') |"
