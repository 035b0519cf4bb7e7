#!/usr/bin/env bash
# Go TLS instrumentation costs, with the agent from BUILD_DIR (default build):
#   1. what one uprobe hit costs on this kernel, by the instruction it replaces: a Go function
#      called in a loop (gotls spin), one tracefs uprobe counted by `perf stat` at its first
#      instruction (cmp, single-stepped), at the stack check's jbe (emulated) and at its ret
#      (single-stepped);
#   2. sonde's added cost per crypto/tls Read/Write call (a TLS echo over loopback, with and
#      without the agent; each round trip is 2 Writes + 2 Reads), and the probe kinds in use;
#   3. exec → probes attached for Go binaries the agent has never seen (VARIANTS builds that
#      differ only in a linker-set string), p50 and p99;
#   4. the agent's CPU and RSS, and exchanges counted, while one Go HTTPS client sends requests
#      as fast as it can (or at RATE per second) for 20 s.
# Usage: bench/gotls/run.sh [BUILD_DIR] [RATE] [VARIANTS] [SPINS]   (root; prints Markdown tables)
set -euo pipefail
build="${1:-build}"
rate="${2:-100000}"
variants="${3:-20}"
spins="${4:-1000000}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19498
source "$here/../agent_lib.sh"
build_gotls "$tmp/gotls"
for i in $(seq "$variants"); do
  build_gotls "$tmp/variant-$i" -ldflags="-X main.variant=$i"
done

# --- 1. bare uprobes on main.spin --------------------------------------------------------
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
# file offset of a virtual address, through the executable PT_LOAD
file_offset() {
  local a=$(($1)) type off va pa filesz rest
  while read -r type off va pa filesz rest; do
    [[ "$type" == LOAD && "$rest" == *" E "* ]] || continue
    if ((a >= va && a < va + filesz)); then printf '0x%x\n' $((a - va + off)); fi
  done < <(readelf -lW "$tmp/gotls")
}
site() { go tool objdump -s '^main.spin$' "$tmp/gotls" | awk -v op="$1" '$4 == op { print "0x" substr($2, 3); exit }'; }
spin_ns() { for _ in 1 2 3; do "$tmp/gotls" spin "$spins"; done | median; }
bare="$(spin_ns)"
declare -A probed
for op in CMPQ JBE RET; do
  off="$(file_offset "$(site $op)")"
  echo "p:sonde_bench/spin_$op $tmp/gotls:$off" >>/sys/kernel/tracing/uprobe_events
  hits_ns="$(for _ in 1 2 3; do
    perf stat -x, -e "sonde_bench:spin_$op" -o "$tmp/perf.out" -- "$tmp/gotls" spin "$spins"
  done | median)"
  hits="$(awk -F, '/spin_/ { print $1 }' "$tmp/perf.out")"
  # A call that grows its stack runs the first instructions twice (morestack restarts it).
  ((hits >= spins && hits < spins + 1000)) || { echo "bench: $op probe hit $hits times for $spins calls" >&2; exit 1; }
  probed[$op]="$hits_ns"
  echo "-:sonde_bench/spin_$op" >>/sys/kernel/tracing/uprobe_events
done

# --- 2. TLS echo ---------------------------------------------------------------------------
trips=20000 runs=7 size=64
echo_ns() { for _ in $(seq $runs); do "$tmp/gotls" echo $trips $size; done | median; }
base="$(echo_ns)"
start_bench_agent
# A long-lived process of the binary (the server of part 4) keeps its probes attached: the echo
# runs and the load client are new processes of an instrumented binary, counted from their
# first call. Without it each short echo run would exec an uninstrumented binary and mostly
# finish before the probes were attached (they go with the binary's last process).
"$tmp/gotls" server >"$tmp/server.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q listening "$tmp/server.out" && break; sleep 0.1; done
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
for _ in $(seq 300); do
  curl -sf "127.0.0.1:$port/metrics" | grep -q '^sonde_agent_gotls_processes{.*container="gotls".*} [1-9]' && break
  sleep 0.1
done
with="$(echo_ns)"
verdict="$(curl -sf "127.0.0.1:$port/metrics" | grep "^sonde_agent_gotls_binaries{binary=\"$tmp/gotls\"")"
entry_probe="$(sed -n 's/.*entry_probe="\([^"]*\)".*/\1/p' <<<"$verdict")"
return_probe="$(sed -n 's/.*return_probe="\([^"]*\)".*/\1/p' <<<"$verdict")"

# --- 3. exec → attached, never-seen binaries -----------------------------------------------
# A binary not attached within waitprobe's 10 s counts as 10 s (and is reported).
latencies="$(for i in $(seq "$variants"); do "$tmp/variant-$i" waitprobe "$(date +%s%N)" || echo 10000000000; done)"
late="$(awk '$1 >= 10000000000 { n++ } END { print n + 0 }' <<<"$latencies")"
pct() { sort -n | awk -v p="$1" '{ a[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; printf "%.1f", a[i] / 1e6 }'; }
p50="$(pct 50 <<<"$latencies")"
p99="$(pct 99 <<<"$latencies")"

# --- 4. sustained load ---------------------------------------------------------------------
ln -s gotls "$tmp/gotls-load"
t0="$(agent_ticks)"; s0="$(date +%s.%N)"
done_n="$("$tmp/gotls-load" load "$server_port" 20 "$rate" | awk '{ print $2 }')"
t1="$(agent_ticks)"; s1="$(date +%s.%N)"
cpu="$(cpu_percent "$t0" "$t1" "$s0" "$s1")"
sleep 1.5
metrics="$(curl -sf "127.0.0.1:$port/metrics")"
counted="$(awk '/^container_go_tls_requests_total\{.*container="gotls-load".*direction="client"/ { s += $2 } END { print s + 0 }' <<<"$metrics")"
full="$(awk '/^sonde_agent_gotls_map_full_total/ { s += $2 } END { print s + 0 }' <<<"$metrics")"
rss="$(agent_rss_mib)"
achieved="$(awk -v n="$done_n" -v s="$s0" -v e="$s1" 'BEGIN { printf "%.0f", n / (e - s) }')"

added="$(awk -v a="$with" -v b="$base" 'BEGIN { printf "%.0f", (a - b) / 4 }')"
cat <<TABLE
| bare uprobe on a Go function (perf stat, $spins calls) | ns per call | added per hit |
|---|---|---|
| no probe | $bare | |
| at the first instruction (cmp, single-stepped) | ${probed[CMPQ]} | $((probed[CMPQ] - bare)) ns |
| at the stack check's jbe (emulated) | ${probed[JBE]} | $((probed[JBE] - bare)) ns |
| at the ret (single-stepped) | ${probed[RET]} | $((probed[RET] - bare)) ns |

| TLS echo round trip ($size B: 2 Write + 2 Read calls) | without agent | with agent | added per crypto/tls call |
|---|---|---|---|
| median of $runs runs of $trips | $base ns | $with ns | $added ns ($(awk -v a="$added" -v j="$((probed[JBE] - bare))" 'BEGIN { printf "%.2f", a / j }') x the emulated bare uprobe) |

Probe kinds in use: entry $entry_probe, return $return_probe.

| exec → probes attached, $variants never-seen Go binaries ($late not within 10 s) | ms |
|---|---|
| p50 | $p50 |
| p99 | $p99 |

| sustained HTTPS load, one keep-alive client, 20 s | value |
|---|---|
| requests per second (target $rate) | $achieved |
| client requests counted by the agent | $counted of $done_n |
| kernel map inserts failed (map full) | $full |
| agent CPU | $cpu % of one core |
| agent RSS | $rss MiB |
TABLE
