#!/usr/bin/env bash
# What reading libuv's thread pool (nodejsThreadPool) costs: an fs-heavy Node.js workload's
# throughput and CPU time per call (bench/nodejs/fs_heavy.js: 64 chains of fs.stat +
# fs.readFile, all through the pool) with the agent without the instrumentation (nodejsEventLoop only) and with it
# (nodejsEventLoop + nodejsThreadPool), interleaved, and with no agent; per run the agent's CPU
# (utime + stime over the workload's window) and its own account of the time spent reading pools
# (sonde_agent_nodejs_threadpool_poll_seconds_total).
# Usage: bench/nodejs/threadpool_cost.sh [BUILD_DIR] [RUNS] [SECONDS]   (root; a Markdown table)
# SETS="without with" leaves out the runs with no agent. At the end: each set's median, and the
# median over rounds of with/without (adjacent runs, so a load that drifts cancels out), with
# the ratios' quartiles and the median's 90 % bootstrap interval.
set -euo pipefail
build="${1:-build}"
runs="${2:-3}"
seconds="${3:-10}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=19497
source "$here/../agent_lib.sh"

config() {  # config WITH_POOL: the agent's config file
  cat >"$tmp/agent-$1.yaml" <<YAML
targets:
  - exe: "/usr/bin/node*"
instrumentations:
  nodejsEventLoop: true
  goTLS: false
  nodejsThreadPool: $1
YAML
  echo "$tmp/agent-$1.yaml"
}
metric() { curl -sf "127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# run WHAT: one workload run under WHAT (none, without, with); prints a table row.
run() {
  local what="$1" t0 t1 ticks0=0 ticks1=0 poll0=0 poll1=0 ops us cpu="-" poll="-"
  if [[ $what != none ]]; then
    start_bench_agent --config "$(config "$([[ $what == with ]] && echo true || echo false)")"
  fi
  UV_USE_IO_URING=0 /usr/bin/node "$here/fs_heavy.js" "$seconds" 64 >"$tmp/fs.out" &
  local wpid=$!
  if [[ $what != none ]]; then
    # Selected (and, with the pool, read) before the measured window starts (1 s of warm-up).
    for _ in $(seq 50); do
      curl -sf "127.0.0.1:$port/metrics" | grep -q '^sonde_agent_nodejs_processes{.*} 1$' && break
      sleep 0.02
    done
    sleep 1
    ticks0="$(agent_ticks)" t0="$(date +%s.%N)" poll0="$(metric sonde_agent_nodejs_threadpool_poll_seconds_total)"
  fi
  wait "$wpid"
  read -r _ ops us <"$tmp/fs.out"
  if [[ $what != none ]]; then
    ticks1="$(agent_ticks)" t1="$(date +%s.%N)" poll1="$(metric sonde_agent_nodejs_threadpool_poll_seconds_total)"
    cpu="$(cpu_percent "$ticks0" "$ticks1" "$t0" "$t1")"
    if [[ $what == with ]]; then
      poll="$(awk -v a="$poll0" -v b="$poll1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.2f", 100 * (b - a) / (e - s) }')"
    fi
    stop_bench_agent
  fi
  echo "| $what | $ops | $us | $cpu | $poll |"
}

sets="${SETS:-none without with}"
echo "| agent | fs calls per second | workload CPU µs per call | agent CPU, % of one core | reading pools, % of wall time |"
echo "|---|---|---|---|---|"
for _ in $(seq "$runs"); do
  for what in $sets; do run "$what"; done
done | tee "$tmp/rows"
echo
median_of() { awk -F' *[|] *' -v w="$1" -v c="$2" '$2 == w { print $c }' "$tmp/rows" | median; }
for what in $sets; do
  echo "median, $what: $(median_of "$what" 3) calls/s, $(median_of "$what" 4) µs of CPU per call"
done
awk -F' *[|] *' '$2 == "without" { o = $3; u = $4 } $2 == "with" && o { print $3 / o, $4 / u }' \
  "$tmp/rows" >"$tmp/ratios"
echo "median of with/without per round: throughput $(cut -d' ' -f1 "$tmp/ratios" | median)," \
  "CPU per call $(cut -d' ' -f2 "$tmp/ratios" | median) ($(wc -l <"$tmp/ratios") rounds)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); ${seconds} s per row, $(nproc) CPUs"
# How far the rounds' spread lets the median move: quartiles, and the median's 90 % interval by
# bootstrap (10,000 resamples of the rounds, a fixed seed so that a rerun on the same rows agrees).
python3 - "$tmp/ratios" <<'PY'
import random, statistics, sys
rows = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
random.seed(1)
for i, name in enumerate(("throughput", "CPU per call")):
    r = [row[i] for row in rows]
    if len(r) < 2:
        continue
    q = statistics.quantiles(r, n=4)
    meds = sorted(statistics.median(random.choices(r, k=len(r))) for _ in range(10000))
    print(f"{name} with/without: quartiles {q[0]:.3f} {q[2]:.3f}, median's 90 % interval "
          f"{meds[500]:.3f}-{meds[9500]:.3f}")
PY
