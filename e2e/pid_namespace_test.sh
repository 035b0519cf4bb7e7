#!/usr/bin/env bash
# The agent in a pid namespace of its own, as on kind, k3d and sysbox nodes: its /proc shows
# other numbers than the kernel's initial ones, which the BPF programs must translate. Inside
# `unshare --pid --fork --mount-proc`, the standalone agent (CPU sampling on too, so every
# program that keys by pid is loaded) measures two real Node.js processes: one in the agent's
# namespace and one in a namespace below it (a pod's, on such a node). `doctor` says which case
# it is, inside and outside.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
blocker="$(cd "$(dirname "$0")" && pwd)/workloads/blocker.js"
tmp="$SONDE_E2E_TMP"
ns_pid=
# unshare --fork ignores SIGTERM while it waits: kill the namespace's init (its child, pid 1
# inside), which takes every process of the namespace with it.
cleanup() {
  [[ -n "$ns_pid" ]] || return 0
  local init
  init="$(ps -o pid= --ppid "$ns_pid" | tr -d ' ')"
  [[ -n "$init" ]] && kill -KILL "$init" 2>/dev/null
  wait "$ns_pid" 2>/dev/null || true
}
trap cleanup EXIT

"$SONDE_BIN/sonde-agent" doctor >"$tmp/doctor-host.txt" 2>&1 || true
grep -E "pid namespace.*initial" "$tmp/doctor-host.txt" ||
  fail "doctor on the host does not say the initial pid namespace: $(cat "$tmp/doctor-host.txt")"

port="$(free_port)"
ln -sf /usr/bin/node "$tmp/node-same"
ln -sf /usr/bin/node "$tmp/node-nested"
cat >"$tmp/config.yaml" <<YAML
instrumentations:
  nodejsEventLoop: true
  goTLS: true
  cpu: {enabled: true, frequencyHz: 19}
YAML
cat >"$tmp/inside.sh" <<SH
set -u
"$SONDE_BIN/sonde-agent" doctor >"$tmp/doctor-ns.txt" 2>&1
"$SONDE_BIN/sonde-agent" --standalone --config "$tmp/config.yaml" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent.log" 2>&1 &
for _ in \$(seq 300); do curl -sf "http://127.0.0.1:$port/metrics" >/dev/null && break; sleep 0.1; done
echo "agent up" >"$tmp/agent.up"
export BLOCKER_GO_FILE="$tmp/go"
"$tmp/node-same" "$blocker" timer 5 200 0 >"$tmp/same.out" 2>&1 &
same=\$!
unshare --pid --fork "$tmp/node-nested" "$blocker" timer 5 200 0 >"$tmp/nested.out" 2>&1 &
nested=\$!
wait \$same; echo "same exit \$?" >>"$tmp/exits"
wait \$nested; echo "nested exit \$?" >>"$tmp/exits"
sleep 1000
SH
unshare --pid --fork --mount-proc --kill-child bash "$tmp/inside.sh" &
ns_pid=$!
wait_until 300 test -e "$tmp/agent.up" || { cat "$tmp/agent.log" "$tmp/doctor-ns.txt"; fail "the agent did not start inside the namespace"; }
grep -E "pid namespace.*pid:\[[0-9]+\]" "$tmp/doctor-ns.txt" ||
  fail "doctor in a nested pid namespace does not say so: $(cat "$tmp/doctor-ns.txt")"
# Each node blocks only once the agent instruments it: the nested one goes through unshare's
# fork and exec first, and a block before the agent's probes are in is not seen.
instrumented() {
  curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt" || return 1
  grep -q "^container_nodejs_event_loops{.*container=\"node-$1\".*} 1\$" "$tmp/metrics.txt"
}
for w in same nested; do
  wait_until 300 instrumented "$w" || fail "$w: not instrumented: $(tail -20 "$tmp/agent.log")"
done
touch "$tmp/go"
wait_until 300 bash -c "[[ \$(grep -c exit '$tmp/exits' 2>/dev/null) == 2 ]]" ||
  fail "node workloads did not finish: $(cat "$tmp"/*.out)"
grep -q "same exit 0" "$tmp/exits" && grep -q "nested exit 0" "$tmp/exits" ||
  fail "a node workload failed under the agent: $(cat "$tmp/exits")"
for w in same nested; do
  grep -q "blocking done" "$tmp/$w.out" || fail "$w: node did not print its output"
done

metrics="$(curl -sf "http://127.0.0.1:$port/metrics")"
for w in same nested; do
  v="$(awk -v c="container=\"node-$w\"" '/^container_nodejs_event_loop_blocked_time_seconds_total\{/ && index($0, c) { print $2 }' <<<"$metrics")"
  echo "node in the $w namespace: ${v:-none} s blocked (injected 1.0 s)"
  [[ -n "$v" ]] || fail "$w: no series; agent log: $(tail -20 "$tmp/agent.log")"
  at_least "$v" 0.95 || fail "$w: agent $v s, injected 1.0 s"
  at_least 1.3 "$v" || fail "$w: agent $v s, injected 1.0 s"
  n="$(awk -v c="container=\"node-$w\"" '/^container_nodejs_event_loop_block_duration_seconds_bucket\{/ && index($0, c) && /le="0.25"/ { print $2 }' <<<"$metrics")"
  m="$(awk -v c="container=\"node-$w\"" '/^container_nodejs_event_loop_block_duration_seconds_bucket\{/ && index($0, c) && /le="0.1"/ { print $2 }' <<<"$metrics")"
  echo "  blocks in (0.1, 0.25] s: $((n - m)) (injected 5 of 200 ms)"
  [[ $((n - m)) == 5 ]] || fail "$w: $((n - m)) blocks of 0.1-0.25 s, want 5"
done
echo "PASS"
