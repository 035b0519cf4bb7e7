#!/usr/bin/env bash
# What TLS adds to a scrape of the agent (--tls-cert-file): SCRAPES sequential GETs of /metrics,
# each on a new connection as Prometheus' scrapes of civetweb are (it closes after each answer),
# from the agent over plain HTTP and then over TLS (an ECDSA P-256 certificate, as the chart's
# cert-manager Certificate asks for), ROUNDS times alternating; per scrape: the wall time curl
# took and the agent's CPU time. The agent is from BUILD_DIR (default build), with its default
# standalone configuration on this host. Usage: bench/metrics/scrape_tls.sh [BUILD_DIR] [SCRAPES]
# [ROUNDS]   (root; prints one Markdown table row per mode)
set -euo pipefail
build="${1:-build}"
scrapes="${2:-300}"
rounds="${3:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
source "$here/../../e2e/lib.sh"  # serving_cert
name="sonde-agent.sonde-system.svc"
serving_cert "$tmp/tls" "$name" >/dev/null

# one MODE: per-scrape wall ms and agent CPU ms over SCRAPES scrapes, as "wall cpu".
one() {
  local url=(http://127.0.0.1:$port/metrics) extra=()
  if [[ "$1" == tls ]]; then
    url=(--cacert "$tmp/tls/ca.crt" --resolve "$name:$port:127.0.0.1" "https://$name:$port/metrics")
    extra=(--tls-cert-file "$tmp/tls/tls.crt" --tls-private-key-file "$tmp/tls/tls.key")
  fi
  "$agent" --standalone --metrics-address "127.0.0.1:$port" --log-level warn "${extra[@]}" \
    >"$tmp/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 300); do curl -sf -o /dev/null "${url[@]}" && break; sleep 0.1; done
  sleep 2  # past the first /proc scan
  local t0 t1 c0 c1
  c0="$(agent_ticks)"
  t0="$(date +%s.%N)"
  for _ in $(seq "$scrapes"); do curl -sf -o /dev/null "${url[@]}"; done
  t1="$(date +%s.%N)"
  c1="$(agent_ticks)"
  stop_bench_agent
  awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" -v n="$scrapes" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.3f %.3f\n", (b - a) * 1000 / n, (d - c) * 1000 / hz / n }'
}
declare -A wall cpu
for _ in $(seq "$rounds"); do
  for mode in plain tls; do
    read -r w c < <(one "$mode")
    wall[$mode]+="$w "
    cpu[$mode]+="$c "
  done
done
for mode in plain tls; do
  printf '| %s | %s | %s | %s |\n' "$mode" "$scrapes x $rounds" \
    "$(tr ' ' '\n' <<<"${wall[$mode]}" | sed '/^$/d' | median)" \
    "$(tr ' ' '\n' <<<"${cpu[$mode]}" | sed '/^$/d' | median)"
done
