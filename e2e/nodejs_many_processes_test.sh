#!/usr/bin/env bash
# Fifty node processes of one binary and two "pods" running one image through two overlay
# mounts of one lower layer: every process is measured right against Node's own account, and
# the overlay pods are not double counted. Needs root (mounts overlays).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
blocker="$(cd "$(dirname "$0")" && pwd)/workloads/blocker.js"
tmp="$SONDE_E2E_TMP"
pids=()
mounts=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

port="$(free_port)"
start_agent "$port"
metric=container_nodejs_event_loop_blocked_time_seconds_total
series() { echo "$metric{namespace=\"\",pod=\"\",container=\"$1\",node=\"$(hostname)\"}"; }

# Two pods of one image: one lower layer holding a node binary, two overlay mounts over it.
mkdir -p "$tmp/lower"
cp /usr/bin/node "$tmp/lower/node-ovl"
for pod in a b; do
  mkdir -p "$tmp/$pod/upper" "$tmp/$pod/work" "$tmp/$pod/merged"
  mount -t overlay overlay \
    -o "lowerdir=$tmp/lower,upperdir=$tmp/$pod/upper,workdir=$tmp/$pod/work" "$tmp/$pod/merged"
  mounts+=("$tmp/$pod/merged")
done
dev_a="$(stat -c %d "$tmp/a/merged/node-ovl")"
dev_b="$(stat -c %d "$tmp/b/merged/node-ovl")"
[[ "$dev_a" != "$dev_b" ]] || fail "overlay mounts share st_dev; the test needs distinct ones"

# Fifty processes of /usr/bin/node, each under a name of its own (its own series), each
# blocking 2 x 100 ms in its own time slot. Each process's number is checked against Node's
# own account of the same quantity, its event-loop utilization (libuv's idle-time metrics):
# on two CPUs shared with fifty processes a loop also waits for a CPU now and then, which is
# blocked time too. Node counts from the loop's start, the agent from the loop's first wait,
# so the agent's value lies between Node's count after "ready" and Node's total; the injected
# blocking is a lower bound.
n=50
mkdir -p "$tmp/bin"
# Launched 10 per second (fifty at once would be a start-up storm on two CPUs); process i,
# launched at i/10 s, blocks in the slot starting 7 + 0.3 i s after the first launch.
for i in $(seq -w 1 $n); do
  ln -s /usr/bin/node "$tmp/bin/node-w$i"
  BLOCKER_START_DELAY_MS=$((7000 + 10#$i * 200)) \
    "$tmp/bin/node-w$i" "$blocker" timer 2 100 >"$tmp/w$i.out" 2>&1 &
  pids+=($!)
  sleep 0.1
done
# The overlay pods: 3 x 100 ms and 5 x 100 ms, after the fifty.
BLOCKER_START_DELAY_MS=$((7000 + (n + 2) * 300 - n * 100)) \
  "$tmp/a/merged/node-ovl" "$blocker" timer 3 100 >"$tmp/ovl-a.out" 2>&1 &
pids+=($!)
BLOCKER_START_DELAY_MS=$((7000 + (n + 4) * 300 - n * 100)) \
  "$tmp/b/merged/node-ovl" "$blocker" timer 5 100 >"$tmp/ovl-b.out" 2>&1 &
pids+=($!)

# Waits for a line starting with PREFIX in a workload's output with shell builtins only (a
# loop forking grep many times a second would itself compete for the CPUs); prints the Node
# active seconds it carries.
elu_at() {  # elu_at OUT PREFIX
  local out="$1" line="" deadline=$((SECONDS + 120))
  until [[ -n "$line" ]]; do
    ((SECONDS < deadline)) || return 1
    while read -r l; do [[ "$l" == "$2"* ]] && line="$l"; done <"$out" || true
    [[ -n "$line" ]] || sleep 0.05
  done
  awk -v l="$line" 'BEGIN { sub(/.*elu_active_ms=/, "", l); print l / 1000 }'
}
# check_process NAME AGENT_VALUE ELU_READY ELU_DONE INJECTED: prints a complaint, or nothing.
check_process() {
  awk -v n="$1" -v v="$2" -v r="$3" -v d="$4" -v inj="$5" 'BEGIN {
    lo = d - r; hi = d; tol = 0.05 * d; if (tol < 0.02) tol = 0.02
    if (v < lo - tol || v > hi + tol || v < inj * 0.95)
      printf "%s: agent %.3f s, node %.3f s after ready (%.3f s in all), injected %.1f s\n", n, v, lo, d, inj
  }'
}

until grep -q ready "$tmp/w01.out" 2>/dev/null; do
  ((SECONDS < 120)) || fail "node-w01 did not start"
  sleep 0.2
done
# Every process is instrumented.
instrumented() {
  curl -sf "http://127.0.0.1:$port/metrics" | awk '/^sonde_agent_nodejs_processes\{/ { s += $2 } END { print s }'
}
wait_until 100 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_nodejs_processes\\{/ { s += \$2 } END { print s }') == $((n + 2)) ]]" ||
  fail "instrumented processes: $(instrumented), want $((n + 2))"
echo "$((n + 2)) processes instrumented"

wrong=0
for i in $(seq -w 1 $n); do
  done_elu="$(elu_at "$tmp/w$i.out" "blocking done")" || fail "node-w$i did not finish"
  ready_elu="$(elu_at "$tmp/w$i.out" ready)"
  v="$(agent_metric "$port" "$(series "node-w$i")")"
  complaint="$(check_process "node-w$i" "${v:-0}" "$ready_elu" "$done_elu" 0.2)"
  [[ -z "$complaint" ]] || { echo "$complaint"; wrong=$((wrong + 1)); }
done
((wrong == 0)) || fail "$wrong of $n processes measured wrong"
echo "all $n processes: agent agrees with Node's own event-loop utilization (5% or 20 ms)"

done_a="$(elu_at "$tmp/ovl-a.out" "blocking done")" || fail "overlay pod a did not finish"
done_b="$(elu_at "$tmp/ovl-b.out" "blocking done")" || fail "overlay pod b did not finish"
ready_sum="$(awk -v a="$(elu_at "$tmp/ovl-a.out" ready)" -v b="$(elu_at "$tmp/ovl-b.out" ready)" 'BEGIN { print a + b }')"
done_sum="$(awk -v a="$done_a" -v b="$done_b" 'BEGIN { print a + b }')"
v="$(agent_metric "$port" "$(series node-ovl)")"
echo "overlay pods: injected 0.3 + 0.5 s, node's own $done_sum s, agent ${v:-none} s"
complaint="$(check_process "overlay pods" "${v:-0}" "$ready_sum" "$done_sum" 0.8)"
[[ -z "$complaint" ]] || fail "$complaint (twice the injected would be double counting)"

# Every process gone: no Node.js process left instrumented.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
wait_until 50 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_nodejs_processes\\{/ { s += \$2 } END { print s + 0 }') == 0 ]]" ||
  fail "processes still instrumented after every process exited"

# Graceful shutdown: SIGINT detaches everything the agent attached.
agent_progs() {
  local id
  for id in $(bpftool -j link show | jq -r '.[].prog_id'); do
    bpftool -j prog show id "$id" 2>/dev/null | jq -r .name
  done | grep -cE '^(handle_exec|handle_exit|sys_enter_wait|sys_exit_wait|epoll_wait_ente|epoll_wait_exit|main_thread_exi)$' || true
}
[[ "$(agent_progs)" -gt 0 ]] || fail "no agent programs attached while it runs"
stop_agent
[[ "$(agent_progs)" == 0 ]] || fail "agent links left in the kernel after SIGINT"
echo "nodejs many processes: ok"
