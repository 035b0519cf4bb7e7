#!/usr/bin/env bash
# Go TLS over HTTP/2, sustained: one HTTP/2 connection between Go's client and server
# (e2e/workloads/gotls `-h2 rate`: 8 goroutines sending GET back to back on the connection) for
# SECONDS, first without the agent, then with it (the server instrumented before the client
# starts). Prints, as Markdown: requests per second and the client's own median latency with and
# without the agent, what the agent counted on each side against what was sent, kernel map and
# ring-buffer failures, HTTP/2 connections lost, and the agent's CPU and RSS during the loaded
# run.
# Usage: bench/gotls/http2.sh [BUILD_DIR] [SECONDS]   (root)
set -euo pipefail
build="${1:-build}"
seconds="${2:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19499
source "$here/../agent_lib.sh"
build_gotls "$tmp/gotls"
ln -s gotls "$tmp/h2server"
ln -s gotls "$tmp/h2client"

start_server() {
  "$tmp/h2server" -h2 server >"$tmp/server.out" 2>&1 &
  server_pid=$!
  pids+=($server_pid)
  for _ in $(seq 50); do grep -q listening "$tmp/server.out" && break; sleep 0.1; done
  server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
}
field() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
metric_sum() { curl -sf "127.0.0.1:$port/metrics" | awk -v re="$1" '$0 ~ re { s += $NF } END { print s + 0 }'; }

# --- without the agent ---------------------------------------------------------------------
start_server
base="$("$tmp/h2client" -h2 rate "$server_port" "$seconds")"
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true

# --- with the agent ------------------------------------------------------------------------
start_bench_agent
start_server
for _ in $(seq 300); do
  curl -sf "127.0.0.1:$port/metrics" | grep -q '^sonde_agent_gotls_processes{.*container="h2server".*} 1' && break
  sleep 0.1
done
t0="$(agent_ticks)" s0="$(date +%s.%N)"
with="$("$tmp/h2client" -h2 rate "$server_port" "$seconds")"
t1="$(agent_ticks)" s1="$(date +%s.%N)"
rss="$(agent_rss_mib)"
sleep 1.5 # the client's exit folds its counts; the ring buffer is drained every 100 ms
client_counted="$(metric_sum '^container_go_tls_requests_total\{.*container="h2client".*protocol="http2"')"
server_counted="$(metric_sum '^container_go_tls_requests_total\{.*container="h2server".*protocol="http2"')"
full="$(metric_sum '^sonde_agent_gotls_map_full_total')"
lost="$(metric_sum '^sonde_agent_gotls_http2_connections_total\{outcome="(lost|malformed|evicted|unparsed)"')"

n_base="$(field done "$base")" n_with="$(field done "$with")"
cat <<EOF
| one HTTP/2 connection, 8 streams at a time, ${seconds} s | without agent | with agent |
|---|---|---|
| requests per second | $((n_base / seconds)) | $((n_with / seconds)) |
| client's own median latency | $(field median_us "$base") µs | $(field median_us "$with") µs |

| with the agent | value |
|---|---|
| requests sent by the client | $n_with |
| counted on the client side | $client_counted |
| counted on the server side | $server_counted |
| kernel map inserts failed, ring buffer full, bounds hit (sonde_agent_gotls_map_full_total) | $full |
| HTTP/2 connections lost, malformed, evicted or unparsed | $lost |
| agent CPU | $(cpu_percent "$t0" "$t1" "$s0" "$s1") % of one core |
| agent RSS | $rss MiB |
EOF
