#!/usr/bin/env bash
# What the Go TLS probes cost a chatty client, estimated by the agent and measured: a client
# (`gotls calls PORT N`: N HTTP/1.1 requests back to back, with its own (*tls.Conn).Write and
# .Read calls, which it counts) against an unprobed server (another copy of the binary, not a
# target), RUNS times without the agent and RUNS times with it (after a first run that leaves
# the binary's probes in place, so every measured run is probed from its first call). Prints
# the calls the client made, the probe hits the agent counted for it, the agent's estimate of
# the CPU they added (container_go_tls_probe_cpu_seconds_total) and the CPU the client used
# (user + system, GNU time), medians over the runs.
# Usage: bench/gotls/overhead.sh [BUILD_DIR] [REQUESTS] [RUNS]   (root)
set -euo pipefail
build="${1:-build}"
requests="${2:-20000}"
runs="${3:-5}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
source "$here/../../e2e/lib.sh"  # gotls_only_config
build_gotls "$tmp/gotls"
cp "$tmp/gotls" "$tmp/gtls-server"
cp "$tmp/gotls" "$tmp/gtls-calls"
"$tmp/gtls-server" server >"$tmp/server.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$tmp/server.out" && break; sleep 0.1; done
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"

# run_client: one run; prints "WRITES READS CPU_SECONDS".
run_client() {
  local out
  out="$(/usr/bin/time -f 'cpu %U %S' "$tmp/gtls-calls" calls "$server_port" "$requests" 2>&1)"
  awk '/^calls/ { w = $4; r = $6 } /^cpu/ { c = $2 + $3 } END { print w, r, c }' <<<"$out"
}
metric() {  # metric NAME SITE: summed over the client's series (SITE: a label filter or "")
  curl -sf "127.0.0.1:$port/metrics" |
    awk -v m="$1" -v f="$2" 'index($0, m "{") == 1 && index($0, "container=\"gtls-calls\"") && index($0, f) { s += $NF } END { printf "%.9f\n", s }'
}

without=()
for _ in $(seq "$runs"); do without+=("$(run_client | awk '{ print $3 }')"); done

gotls_only_config "$tmp/agent.yaml" "$tmp/gtls-calls"
start_bench_agent --config "$tmp/agent.yaml"
run_client >/dev/null  # attaches the probes, which the binary keeps between runs
sleep 1
with=() estimated=()
for _ in $(seq "$runs"); do
  entry0="$(metric container_go_tls_probe_hits_total 'site="entry"')"
  ret0="$(metric container_go_tls_probe_hits_total 'site="return"')"
  cpu0="$(metric container_go_tls_probe_cpu_seconds_total '')"
  read -r writes reads cpu < <(run_client)
  sleep 0.5
  entry=$(awk -v a="$entry0" -v b="$(metric container_go_tls_probe_hits_total 'site="entry"')" 'BEGIN { printf "%d", b - a }')
  ret=$(awk -v a="$ret0" -v b="$(metric container_go_tls_probe_hits_total 'site="return"')" 'BEGIN { printf "%d", b - a }')
  est=$(awk -v a="$cpu0" -v b="$(metric container_go_tls_probe_cpu_seconds_total '')" 'BEGIN { printf "%.4f", b - a }')
  echo "run: $writes writes + $reads reads; hits entry $entry, return $ret; estimated +$est s; client CPU $cpu s"
  with+=("$cpu")
  estimated+=("$est")
done
costs="$(curl -sf "127.0.0.1:$port/metrics" | awk '/^sonde_agent_uprobe_hit_cost_seconds/ { printf "%s %.0f ns; ", $1, $2 * 1e9 }')"
base="$(printf '%s\n' "${without[@]}" | median)"
probed="$(printf '%s\n' "${with[@]}" | median)"
est="$(printf '%s\n' "${estimated[@]}" | median)"
echo "per-hit costs measured at start: $costs"
echo "| $requests | $base | $probed | $(awk -v a="$base" -v b="$probed" 'BEGIN { printf "%.3f", b - a }') | $est |"
