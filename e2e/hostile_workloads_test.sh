#!/usr/bin/env bash
# Safe to leave on: workloads that would crash, stall, blind or fool an agent, against the real
# agent (standalone), with the real Prometheus scraping it all along.
#   - node --use-largepages=on|silent, selected and unselected, run to completion (a breakpoint
#     in node's code would travel into the copied huge pages and kill them with SIGTRAP), and
#     the selected ones are measured;
#   - a node binary at a path that is not UTF-8 is measured, under a valid label;
#   - a Go binary whose crypto/tls Read symbol claims to span 1 GiB of a sparse file;
#   - a binary whose reads hang (FUSE) costs a worker, not the agent; one whose reads fail with
#     EIO (what a truncated or unreachable file gives through mmap: SIGBUS) is skipped;
#   - an exec storm of 5,000 short processes with a Node.js process started in the middle of
#     it, which is instrumented.
# Through all of it the agent stays up, every scrape passes `promtool check metrics`, Prometheus
# never misses a scrape, and the agent's RSS stays under RSS_BOUND_MIB.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
blocker="$workloads/blocker.js"
tmp="$SONDE_E2E_TMP"
# The sanitizer build's bound: ASan's shadow memory and freed-memory quarantine multiply the
# release build's RSS (docs/safety.md states both). The quarantine is capped at 64 MiB here so
# that what the bound measures is memory the agent keeps, not memory ASan keeps for it.
RSS_BOUND_MIB="${RSS_BOUND_MIB:-400}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=64"
pids=()
fuse_pid=
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # Killing the FUSE server aborts its connection: the hung requests fail, the agent's
  # abandoned worker gets its error and the agent can exit.
  if [[ -n "$fuse_pid" ]]; then
    kill -9 "$fuse_pid" 2>/dev/null || true
    wait "$fuse_pid" 2>/dev/null || true
    umount -l "$tmp/mnt" 2>/dev/null || true
  fi
  stop_prometheus
  stop_agent
}
trap cleanup EXIT

mkdir -p "$tmp/sel" "$tmp/unsel" "$tmp/bin" "$tmp/src" "$tmp/mnt"
cat >"$tmp/agent.yaml" <<YAML
targets:
  - exe: "/usr/bin/node"
  - exe: "$tmp/sel/*"
  - exe: "$tmp/mnt/*"
YAML
port="$(free_port)"
start_agent "$port" --config "$tmp/agent.yaml"
start_prometheus "$port"
metrics() { curl -sf -m 5 "http://127.0.0.1:$port/metrics"; }
blocked_of() {  # blocked_of CONTAINER: the agent's blocked seconds for that series, or none
  metrics | awk -v c="container=\"$1\"" '/^container_nodejs_event_loop_blocked_time_seconds_total\{/ && index($0, c) { v = $2 } END { print (v == "" ? "none" : v) }'
}
# The scrape parses and lints clean; the agent is alive.
check_scrape() {  # check_scrape WHEN
  kill -0 "$AGENT_PID" 2>/dev/null || { tail -30 "$tmp/agent.log"; fail "agent died ($1)"; }
  metrics >"$tmp/scrape.txt" || fail "no scrape ($1)"
  promtool check metrics <"$tmp/scrape.txt" >"$tmp/promtool.txt" 2>&1 ||
    { cat "$tmp/promtool.txt"; fail "promtool check metrics ($1)"; }
  local rss
  rss="$(awk '/^sonde_agent_resident_memory_bytes / { printf "%d", $2 / 1048576 }' "$tmp/scrape.txt")"
  echo "  [$1] scrape ok, agent RSS ${rss} MiB"
  ((rss < RSS_BOUND_MIB)) || fail "agent RSS ${rss} MiB over ${RSS_BOUND_MIB} MiB ($1)"
}
# Runs a node workload to completion: run_node OUT ARGS...; fails unless it exits 0 and prints
# "blocking done".
run_node() {
  local out="$1" status=0; shift
  "$@" >"$out" 2>&1 || status=$?
  ((status == 0)) || { cat "$out"; fail "$* exited with status $status"; }
  grep -q "blocking done" "$out" || { cat "$out"; fail "$*: no 'blocking done'"; }
}

echo "--- node --use-largepages, selected and unselected"
# Selected: /usr/bin/node under names of its own (the series label is the process name).
# Unselected: the same file through a hard link outside the targets (a copy where /tmp is
# another filesystem), running at the same time: a per-file breakpoint would hit it too.
ln /usr/bin/node "$tmp/unsel/node-unsel" 2>/dev/null || cp /usr/bin/node "$tmp/unsel/node-unsel"
for mode in on silent; do
  ln -sf /usr/bin/node "$tmp/bin/node-lp-$mode"
  run_node "$tmp/lp-$mode.out" "$tmp/bin/node-lp-$mode" --use-largepages=$mode "$blocker" timer 3 200 0 &
  sel=$!
  run_node "$tmp/unsel-$mode.out" "$tmp/unsel/node-unsel" --use-largepages=$mode "$blocker" timer 2 100 0 &
  unsel=$!
  wait "$sel" || fail "selected node --use-largepages=$mode"
  wait "$unsel" || fail "unselected node --use-largepages=$mode"
  v="$(blocked_of "node-lp-$mode")"
  echo "  --use-largepages=$mode: both exited 0; selected one measured $v s blocked (injected 0.6 s)"
  [[ "$v" != none ]] && at_least "$v" 0.58 && at_least 1.2 "$v" || fail "largepages=$mode measured $v s"
done
check_scrape largepages

echo "--- a node binary at a path that is not UTF-8"
odd="$tmp/sel/"$'\xff\xfe'"node"
ln /usr/bin/node "$odd" 2>/dev/null || cp /usr/bin/node "$odd"
run_node "$tmp/odd.out" "$odd" "$blocker" timer 2 200 0
# Its process name (the label) is those bytes too: they reach the label as U+FFFD.
v="$(blocked_of $'\xef\xbf\xbd\xef\xbf\xbd'node)"
echo "  measured $v s blocked (injected 0.4 s)"
[[ "$v" != none ]] && at_least "$v" 0.38 || fail "odd path measured $v s"
check_scrape non-utf8

echo "--- a Go binary whose crypto/tls Read symbol spans 1 GiB of a sparse file"
go_build gotls "$tmp/sel/gotls-huge"
/usr/bin/python3 "$workloads/elf_set_symbol_size.py" "$tmp/sel/gotls-huge" 'crypto/tls.(*Conn).Read' 0x40000000
truncate -s +1G "$tmp/sel/gotls-huge"
"$tmp/sel/gotls-huge" echo 50 64 >"$tmp/huge.out" 2>&1 || { cat "$tmp/huge.out"; fail "gotls-huge failed"; }
sleep 1
verdict="$(metrics | grep '^sonde_agent_gotls_binaries{' | grep gotls-huge || true)"
echo "  ran to completion; agent's verdict: ${verdict:-none}"
check_scrape huge-symbol

echo "--- binaries whose reads hang or fail (FUSE)"
ln -s /usr/bin/node "$tmp/src/hang-node"
ln -s /usr/bin/node "$tmp/src/eio-node"
/usr/bin/python3 "$workloads/hostile_fs.py" "$tmp/src" "$tmp/mnt" "$AGENT_PID" >"$tmp/fuse.log" 2>&1 &
fuse_pid=$!
wait_until 100 test -e "$tmp/mnt/hang-node" || { cat "$tmp/fuse.log"; fail "FUSE did not mount"; }
"$tmp/mnt/hang-node" "$blocker" idle 0 0 >"$tmp/hang.out" 2>&1 &
pids+=($!)
"$tmp/mnt/eio-node" "$blocker" idle 0 0 >"$tmp/eio.out" 2>&1 &
pids+=($!)
# While the worker is stuck, the agent keeps serving scrapes within a second.
for i in 1 2 3 4 5 6 7; do
  start_ns=$(date +%s%N)
  metrics >/dev/null || fail "scrape failed while a read hangs"
  ms=$((($(date +%s%N) - start_ns) / 1000000))
  ((ms < 1000)) || fail "scrape took $ms ms while a read hangs"
  sleep 1
done
stuck="$(agent_metric "$port" sonde_agent_inspection_workers_stuck)"
echo "  workers stuck on the hanging file: $stuck"
[[ "$stuck" == 1 ]] || { tail -20 "$tmp/agent.log"; fail "want 1 stuck worker, got $stuck"; }
grep -q "blocking done" "$tmp/eio.out" || fail "the eio-node workload is not running"
[[ "$(blocked_of eio-node)" == none ]] || fail "a binary that cannot be read was instrumented"
# A new Node.js process is still instrumented by the replacement worker.
ln -sf /usr/bin/node "$tmp/bin/node-after-hang"
run_node "$tmp/after-hang.out" "$tmp/bin/node-after-hang" "$blocker" timer 2 200 0
v="$(blocked_of node-after-hang)"
echo "  a node process started after the hang: $v s blocked (injected 0.4 s)"
[[ "$v" != none ]] && at_least "$v" 0.38 || fail "node after the hang measured $v s"
check_scrape fuse

echo "--- an exec storm of 5000 short processes, a Node.js process in the middle"
ln -sf /usr/bin/node "$tmp/bin/node-storm"
storm_start=$SECONDS
for i in $(seq 1 5000); do
  /bin/true
  if ((i == 2500)); then
    "$tmp/bin/node-storm" "$blocker" timer 2 200 0 >"$tmp/storm.out" 2>&1 &
    storm_node=$!
  fi
done
echo "  5000 execs in $((SECONDS - storm_start)) s; events dropped: $(agent_metric "$port" sonde_agent_process_events_dropped_total)"
wait "$storm_node" || fail "the node process in the storm failed"
grep -q "blocking done" "$tmp/storm.out" || fail "the node process in the storm did not finish"
v="$(blocked_of node-storm)"
echo "  the node process started mid-storm: $v s blocked (injected 0.4 s)"
[[ "$v" != none ]] && at_least "$v" 0.38 || fail "node in the storm measured $v s"
check_scrape storm

# Prometheus scraped the agent every second and never failed one.
sleep 2
missed="$(prom_query 'count_over_time(up{job="sonde-agent"}[10m]) - sum_over_time(up{job="sonde-agent"}[10m])')"
scrapes="$(prom_query 'count_over_time(up{job="sonde-agent"}[10m])')"
echo "  prometheus: $scrapes scrapes, $missed failed"
[[ "$missed" == 0 ]] || fail "prometheus failed $missed scrapes"
echo "hostile workloads: ok"
