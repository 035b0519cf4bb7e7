#!/usr/bin/env bash
# Go TLS instrumentation costs, with the agent from BUILD_DIR (default build):
#   1. added cost per crypto/tls Read/Write call (a TLS echo over loopback, with and without
#      the agent; each round trip is 2 Writes + 2 Reads);
#   2. the agent's CPU and RSS while a Go HTTPS client sustains RATE requests per second.
# Usage: bench/gotls/run.sh [BUILD_DIR] [RATE]   (root; prints a Markdown table)
set -euo pipefail
build="${1:-build}"
rate="${2:-500}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
(cd "$here/../../e2e/workloads/gotls" &&
  GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" CGO_ENABLED=0 \
    go build -o "$tmp/gotls" .)

trips=20000 runs=7 size=64
echo_ns() { for _ in $(seq $runs); do "$tmp/gotls" echo $trips $size; done | median; }

base="$(echo_ns)"
start_bench_agent
with="$(echo_ns)"
instrumented="$(curl -sf "127.0.0.1:$port/metrics" | awk '/^sonde_agent_gotls_binaries\{.*instrumented="true"/ { n++ } END { print n + 0 }')"

"$tmp/gotls" server >"$tmp/server.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q listening "$tmp/server.out" && break; sleep 0.1; done
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
t0="$(agent_ticks)"; s0="$(date +%s.%N)"
done_n="$("$tmp/gotls" load "$server_port" 20 "$rate" | awk '{ print $2 }')"
t1="$(agent_ticks)"; s1="$(date +%s.%N)"
cpu="$(cpu_percent "$t0" "$t1" "$s0" "$s1")"
metrics="$(curl -sf "127.0.0.1:$port/metrics")"
counted="$(awk '/^container_go_tls_requests_total\{.*direction="client"/ { s += $2 } END { print s + 0 }' <<<"$metrics")"
rss="$(agent_rss_mib)"
achieved="$(awk -v n="$done_n" -v s="$s0" -v e="$s1" 'BEGIN { printf "%.0f", n / (e - s) }')"

cat <<TABLE
| measure | without agent | with agent | added |
|---|---|---|---|
| TLS echo round trip ($size B: 2 Write + 2 Read calls) | $base ns | $with ns | $(awk -v a="$with" -v b="$base" 'BEGIN { printf "%.0f ns (%.0f ns per call)", a - b, (a - b) / 4 }') |

Median of $runs runs of $trips round trips; binaries instrumented during the run: $instrumented.

| sustained HTTPS load, 20 s | value |
|---|---|
| requests per second (target $rate) | $achieved |
| client requests counted by the agent | $counted of $done_n |
| agent CPU | $cpu % of one core |
| agent RSS | $rss MiB |
TABLE
