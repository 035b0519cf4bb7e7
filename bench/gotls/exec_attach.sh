#!/usr/bin/env bash
# exec → probes attached for never-seen Go binaries, seen by the binary itself: ROUNDS rounds
# (an agent started for each) of VARIANTS builds of the Go workload that differ only in a
# linker-set string (another file each), each run as `gotls waitprobe`, which prints the
# nanoseconds from its launch until a breakpoint appears in its own crypto/tls.(*Conn).Write
# (the probe is live). 0.3 s between binaries: each its own exec burst. A binary not attached
# within 10 s counts as 10 s. AGENT_ARGS in the environment: more agent flags.
# Usage: bench/gotls/exec_attach.sh [BUILD_DIR] [VARIANTS] [ROUNDS]   (root; prints a Markdown table)
set -euo pipefail
build="${1:-build}"
variants="${2:-10}"
rounds="${3:-2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19499
source "$here/../agent_lib.sh"
source "$here/../../e2e/lib.sh"  # gotls_only_config
n=$((variants * rounds))
for i in $(seq "$n"); do
  build_gotls "$tmp/bin/variant-$i" -ldflags="-X main.variant=$i"
done
gotls_only_config "$tmp/agent.yaml" "$tmp/bin/*"
pct() { sort -n | awk -v p="$1" '{ a[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; printf "%.1f", a[i] / 1e6 }'; }
mean() { awk '{ s += $1 } END { printf "%.1f", s / NR / 1e6 }'; }
next=1
load0="$(cut -d' ' -f1-3 /proc/loadavg)"
read -ra args <<<"${AGENT_ARGS:-}"
for r in $(seq "$rounds"); do
  start_bench_agent --config "$tmp/agent.yaml" "${args[@]}"
  sleep 1
  for _ in $(seq "$variants"); do
    "$tmp/bin/variant-$next" waitprobe "$(date +%s%N)" >>"$tmp/ns" || echo 10000000000 >>"$tmp/ns"
    next=$((next + 1))
    sleep 0.3
  done
  stop_bench_agent
done
echo "| binaries | mean | p50 | p90 | max (ms) |"
echo "|---|---|---|---|---|"
echo "| $(wc -l <"$tmp/ns") | $(mean <"$tmp/ns") | $(pct 50 <"$tmp/ns") | $(pct 90 <"$tmp/ns") | $(pct 100 <"$tmp/ns") |"
echo
echo "agent: $agent ${AGENT_ARGS:-}; $rounds rounds of $variants binaries;"
echo "load average at the start and end: $load0 / $(cut -d' ' -f1-3 /proc/loadavg)."
