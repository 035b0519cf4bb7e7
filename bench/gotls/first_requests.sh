#!/usr/bin/env bash
# Go TLS requests counted from a process's first one (issue 21, part 5), with the agent of
# BUILD_DIR (default build; the test build works too, slower):
#   1. kubectl (stripped Go 1.23) run 10 times in a row against a local Go TLS server, one GET
#      each: how many of the 10 are counted, with the binary's probes kept after its last exit
#      (the default) and detached at once (--go-tls-keep-probes-seconds 0, the old behaviour);
#   2. never-seen binaries (fresh copies of a Go client, another inode each) sending 50 requests
#      right after exec: how many are counted, i.e. whether the attach beats the first calls.
#   The agent's own measure of the never-seen binaries' attach is printed too
#   (sonde_agent_gotls_attach_delay_seconds: exec -> probes attached, per process).
# Usage: bench/gotls/first_requests.sh [BUILD_DIR] [ROUNDS]   (root; prints a Markdown table)
#   FIRST_REQUESTS_FRESH_ONLY=1: only part 2. FIRST_REQUESTS_AGENT_ARGS: more agent flags for
#   part 2.
set -euo pipefail
build="${1:-build}"
rounds="${2:-5}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
source "$here/../../e2e/lib.sh"  # gotls_only_config
command -v kubectl >/dev/null || { echo "bench: kubectl is not installed" >&2; exit 1; }
mkdir -p "$tmp/bin"
build_gotls "$tmp/bin/gotls"
ln -s gotls "$tmp/bin/server"
cp "$(command -v kubectl)" "$tmp/bin/kubectl"
gotls_only_config "$tmp/agent.yaml" "$tmp/bin/*"
ok_requests() {  # ok_requests CONTAINER: its client-side 2xx requests counted so far
  curl -sf "127.0.0.1:$port/metrics" | awk -v c="container=\"$1\"" \
    '/^container_go_tls_requests_total\{/ && index($0, c) && /direction="client"/ && /status_class="2xx"/ { s += $NF } END { print s + 0 }'
}
start_server() {
  "$tmp/bin/server" server >"$tmp/server.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q listening "$tmp/server.out" && break; sleep 0.1; done
  server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
  sleep 2  # tracked: its binary is attached
}
# kubectl_series: 10 runs; prints how many of the 10 were counted.
kubectl_series() {
  local before after
  before="$(ok_requests kubectl)"
  for _ in $(seq 10); do
    "$tmp/bin/kubectl" --server "https://127.0.0.1:$server_port" --insecure-skip-tls-verify \
      --token=x --cache-dir "$tmp/kube-cache" get --raw /status/200 >/dev/null 2>&1
  done
  sleep 2
  after="$(ok_requests kubectl)"
  echo $((after - before))
}

load0="$(cut -d' ' -f1-3 /proc/loadavg)"
declare -A kubectl_counts
keeps=(600 0)
if [[ -n "${FIRST_REQUESTS_FRESH_ONLY:-}" ]]; then keeps=(); fi
read -r -a extra_args <<<"${FIRST_REQUESTS_AGENT_ARGS:-}"
for keep in "${keeps[@]}"; do
  start_bench_agent --config "$tmp/agent.yaml" --go-tls-keep-probes-seconds "$keep"
  start_server
  counts=()
  for _ in $(seq "$rounds"); do counts+=("$(kubectl_series)"); done
  kubectl_counts[$keep]="${counts[*]}"
  kill "${pids[-1]}" 2>/dev/null || true
  stop_bench_agent
done

start_bench_agent --config "$tmp/agent.yaml" "${extra_args[@]}"
start_server
codes=()
for _ in $(seq 50); do codes+=(200); done
fresh=()
for r in $(seq "$rounds"); do
  for n in 1 2 3; do
    cp "$tmp/bin/gotls" "$tmp/bin/fresh-$r-$n"
    "$tmp/bin/fresh-$r-$n" client "$server_port" "${codes[@]}" >/dev/null
    sleep 0.3  # each copy its own exec burst
  done
  sleep 2
  for n in 1 2 3; do fresh+=("$(ok_requests "fresh-$r-$n")"); done
done

# Attaches observed: each fresh copy's, and the server's (its binary was new at its exec too).
delays="$(curl -sf "127.0.0.1:$port/metrics" | awk '
  /^sonde_agent_gotls_attach_delay_seconds_bucket/ {
    match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
    if (le != "+Inf") line = line sprintf(" <=%gms:%d", le * 1000, $NF); else line = line " all:" $NF
  }
  /^sonde_agent_gotls_attach_delay_seconds_sum/ { sum = $NF }
  /^sonde_agent_gotls_attach_delay_seconds_count/ { n = $NF }
  END { printf "mean %.1f ms of %d; cumulative%s", n ? 1000 * sum / n : 0, n, line }')"
if [[ -n "${FIRST_REQUESTS_FRESH_ONLY:-}" ]]; then
  kubectl_counts[600]="-"
  kubectl_counts[0]="-"
fi
cat <<TABLE
| measure | counted per series / run |
|---|---|
| kubectl, 10 runs, probes kept after the last exit (default, 600 s) | ${kubectl_counts[600]} of 10 |
| kubectl, 10 runs, probes detached at the last exit (keep 0) | ${kubectl_counts[0]} of 10 |
| never-seen Go client, 50 requests right after exec | ${fresh[*]} of 50 |
| never-seen Go client, exec → attached (the agent's histogram) | $delays |

agent: $agent; $rounds series of 10 kubectl runs per setting, $rounds rounds of 3 fresh copies;
load average at the start and end: $load0 / $(cut -d' ' -f1-3 /proc/loadavg).
TABLE
