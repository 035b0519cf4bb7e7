#!/usr/bin/env bash
# One uprobe per real binary: fifty node processes of one binary share one attachment (agent
# self-metrics and bpftool agree), two "pods" running one image through two overlay mounts of
# one lower layer share one attachment too and are not double counted, and every process's
# own number stays right. Needs root (mounts overlays).
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

# uprobe links of the agent's uv__io_poll program (kernel names are cut at 15 characters).
uv_links() {
  local n=0 id name
  for id in $(bpftool -j link show | jq -r '.[] | select(.type == "perf_event") | .prog_id'); do
    name="$(bpftool -j prog show id "$id" 2>/dev/null | jq -r .name)"
    [[ "$name" == uv_io_poll_ente* ]] && n=$((n + 1))
  done
  echo "$n"
}

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
# blocking 2 x 100 ms in its own time slot. Fifty node start-ups at once on two CPUs starve
# each other's young loops, which is blocked time too (the loop is not waiting for I/O), so
# each process's number is checked against Node's own account of the same quantity, its
# event-loop utilization (libuv's idle-time metrics), and against the injected blocking as a
# lower bound.
n=50
mkdir -p "$tmp/bin"
for i in $(seq -w 1 $n); do
  ln -s /usr/bin/node "$tmp/bin/node-w$i"
  BLOCKER_START_DELAY_MS=$((3000 + 10#$i * 300)) \
    "$tmp/bin/node-w$i" "$blocker" timer 2 100 >"$tmp/w$i.out" 2>&1 &
  pids+=($!)
done
# The overlay pods: 3 x 100 ms and 5 x 100 ms, after the fifty.
BLOCKER_START_DELAY_MS=$((3000 + (n + 2) * 300)) \
  "$tmp/a/merged/node-ovl" "$blocker" timer 3 100 >"$tmp/ovl-a.out" 2>&1 &
pids+=($!)
BLOCKER_START_DELAY_MS=$((3000 + (n + 4) * 300)) \
  "$tmp/b/merged/node-ovl" "$blocker" timer 5 100 >"$tmp/ovl-b.out" 2>&1 &
pids+=($!)

# Waits for "blocking done" in a workload's output with shell builtins only (a loop forking
# grep many times a second would itself compete for the CPUs); prints Node's active seconds.
elu_when_done() {
  local out="$1" line="" deadline=$((SECONDS + 120))
  until [[ "$line" == "blocking done"* ]]; do
    ((SECONDS < deadline)) || return 1
    line=
    while read -r l; do [[ "$l" == "blocking done"* ]] && line="$l"; done <"$out" || true
    [[ -n "$line" ]] || sleep 0.05
  done
  awk -v l="$line" 'BEGIN { sub(/.*elu_active_ms=/, "", l); print l / 1000 }'
}

until grep -q ready "$tmp/w01.out" 2>/dev/null; do
  ((SECONDS < 120)) || fail "node-w01 did not start"
  sleep 0.2
done
# Every process is instrumented, through exactly two attachments: /usr/bin/node and the
# overlay layer's copy (one real file, two mounts).
procs="$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^sonde_agent_nodejs_processes\{/ { s += $2 } END { print s }')"
[[ "$procs" == $((n + 2)) ]] || fail "instrumented processes: $procs, want $((n + 2))"
attachments="$(agent_metric "$port" sonde_agent_uprobe_attachments)"
attaches="$(agent_metric "$port" sonde_agent_uprobe_attaches_total)"
links="$(uv_links)"
echo "$((n + 2)) processes: $attachments attachments ($attaches made), $links uv__io_poll links in bpftool"
[[ "$attachments" == 2 && "$attaches" == 2 && "$links" == 2 ]] ||
  fail "want 2 attachments, 2 made, 2 links"

wrong=0
for i in $(seq -w 1 $n); do
  elu="$(elu_when_done "$tmp/w$i.out")" || fail "node-w$i did not finish"
  v="$(agent_metric "$port" "$(series "node-w$i")")"
  tolerance="$(awk -v e="$elu" 'BEGIN { t = 0.05 * e; print (t > 0.02 ? t : 0.02) }')"
  if ! within "${v:-0}" "$elu" "$tolerance" || ! at_least "${v:-0}" 0.2; then
    echo "node-w$i: agent $v s, node's own $elu s, injected 0.2 s"
    wrong=$((wrong + 1))
  fi
done
((wrong == 0)) || fail "$wrong of $n processes measured wrong"
echo "all $n processes: within 5% (or 20 ms) of Node's own event-loop utilization, >= 0.2 s injected"

elu_a="$(elu_when_done "$tmp/ovl-a.out")" || fail "overlay pod a did not finish"
elu_b="$(elu_when_done "$tmp/ovl-b.out")" || fail "overlay pod b did not finish"
v="$(agent_metric "$port" "$(series node-ovl)")"
want="$(awk -v a="$elu_a" -v b="$elu_b" 'BEGIN { print a + b }')"
echo "overlay pods: injected 0.3 + 0.5 s, node's own $want s, agent ${v:-none} s"
within "${v:-0}" "$want" 0.04 && at_least "${v:-0}" 0.8 ||
  fail "overlay pods: agent ${v:-none} s, want $want (twice that would be double counting)"

# Last user gone, attachment gone.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
wait_until 50 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_uprobe_attachments / { print \$2 }') == 0 ]]" ||
  fail "attachments left after every process exited"
[[ "$(uv_links)" == 0 ]] || fail "uv__io_poll links left in the kernel"
echo "nodejs shared uprobes: ok"
