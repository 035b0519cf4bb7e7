#!/usr/bin/env bash
# The agent's file-descriptor budget (issue 23): the agent started under `ulimit -Sn 1024` (a
# common container default), 80 distinct Go TLS binaries started at once, a bound of 64
# instrumented binaries. /metrics answers throughout (polled while they start); the agent raised
# its soft limit and logged it; exactly 64 binaries are instrumented, each server and its client
# counted exactly; the other 16 carry a LimitExceeded verdict (metric and log) and have no
# series; the agent's descriptors grow by its uprobe links only.
#
# The 80 binaries are copies of one build, each with a different trailer (bytes after the ELF
# image, which the loader never maps): a copy is another inode, so another file for the agent
# and the kernel, and its content differs too. One Go build instead of 80 keeps this short.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
tmp="$SONDE_E2E_TMP"
pids=()
poller=
cleanup() {
  [[ -n "$poller" ]] && kill "$poller" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

binaries=80 bound=64
mkdir -p "$tmp/bin"
go_build gotls "$tmp/gotls"
for i in $(seq 1 $binaries); do
  cp "$tmp/gotls" "$tmp/bin/gtls-$i"
  printf 'sonde fd budget variant %d\n' "$i" >>"$tmp/bin/gtls-$i"
done
[[ "$(cat "$tmp"/bin/gtls-* | md5sum)" != "$(for i in $(seq 1 $binaries); do cat "$tmp/gotls"; done | md5sum)" ]] ||
  fail "the copies have the build's content"

# Only this test's binaries: other Go TLS programs on the machine would take slots of the bound.
gotls_only_config "$tmp/agent.yaml" "$tmp/bin/gtls-*"
port="$(free_port)"
hard="$(ulimit -Hn)"
ulimit -Sn 1024
start_agent "$port" --config "$tmp/agent.yaml" --max-go-tls-binaries "$bound"
ulimit -Sn "$hard"  # for this script's own children
metrics() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics"; }
limits="$(grep 'msg="file descriptor limit"' "$tmp/agent.log")" || fail "no file descriptor limit line in the log"
expect_contains "$limits" ' soft_before=1024 ' "the limit line"
expect_contains "$limits" " soft=$hard " "the limit line"
echo "agent: $limits"
links="$(grep 'msg="Go TLS uprobe links"' "$tmp/agent.log")" || fail "no uprobe links line in the log"
echo "agent: $links"
fds_before="$(ls "/proc/$AGENT_PID/fd" | wc -l)"

# /metrics throughout: one scrape every 0.2 s from before the first binary starts until the
# checks end; every failure is written down.
(
  while :; do
    metrics >/dev/null || echo "$(date +%T.%N) /metrics did not answer" >>"$tmp/poll-failures"
    echo x >>"$tmp/polls"
    sleep 0.2
  done
) &
poller=$!

# All at once.
for i in $(seq 1 $binaries); do
  "$tmp/bin/gtls-$i" server >"$tmp/server-$i.out" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 $binaries); do
  wait_until 200 grep -q listening "$tmp/server-$i.out" || fail "gtls-$i did not start: $(cat "$tmp/server-$i.out")"
done
# Every server considered: instrumented, or left out by the bound.
considered() {
  local m instrumented left_out
  m="$(metrics)"
  instrumented="$(grep -c '^sonde_agent_gotls_processes{.*container="gtls-[0-9]*".*} 1$' <<<"$m" || true)"
  left_out="$(grep -c '^sonde_agent_gotls_binaries{.*reason="LimitExceeded: .*gtls-[0-9]*' <<<"$m" || true)"
  echo "instrumented $instrumented, limit exceeded $left_out"
  ((instrumented + left_out == binaries))
}
wait_until 600 considered || fail "not every server was considered: $(considered)"
m="$(metrics)"
fds_after="$(ls "/proc/$AGENT_PID/fd" | wc -l)"
instrumented=() left_out=()
for i in $(seq 1 $binaries); do
  if grep -q "^sonde_agent_gotls_processes{.*container=\"gtls-$i\".*} 1$" <<<"$m"; then
    instrumented+=("$i")
  else
    verdict="$(grep "^sonde_agent_gotls_binaries{.*binary=\"$tmp/bin/gtls-$i\"" <<<"$m")"
    [[ "$verdict" == *'instrumented="false"'* && "$verdict" == *'reason="LimitExceeded: '* ]] ||
      fail "gtls-$i is neither instrumented nor LimitExceeded: $(grep "gtls-$i\"" <<<"$m")"
    left_out+=("$i")
  fi
done
echo "instrumented: ${#instrumented[@]}, LimitExceeded: ${#left_out[@]}"
((${#instrumented[@]} == bound)) ||
  fail "${#instrumented[@]} binaries instrumented, want $bound:"$'\n'"$(grep -E '^sonde_agent_gotls_(processes|instrumented|not_inst)' <<<"$m")"$'\n'"$(grep -E 'level=(warn|error)' "$tmp/agent.log" | grep -v LimitExceeded)"
((${#left_out[@]} == binaries - bound)) || fail "${#left_out[@]} left out, want $((binaries - bound))"
gauge="$(agent_metric "$port" 'sonde_agent_gotls_instrumented_binaries{kind="instrumented"}')"
[[ "$gauge" == "$bound" ]] || fail "sonde_agent_gotls_instrumented_binaries is $gauge, want $bound"
not_instrumented="$(agent_metric "$port" 'sonde_agent_gotls_not_instrumented_total{reason="binary_limit"}')"
at_least "$not_instrumented" $((binaries - bound)) ||
  fail "sonde_agent_gotls_not_instrumented_total{reason=\"binary_limit\"} is $not_instrumented"
logged="$(grep -c 'msg="Go TLS binary not instrumented: LimitExceeded"' "$tmp/agent.log" || true)"
((logged == binaries - bound)) || fail "$logged LimitExceeded log lines, want one per binary left out"
echo "agent descriptors: $fds_before before, $fds_after with $bound binaries instrumented" \
  "($(awk -v d=$((fds_after - fds_before)) -v n=$bound 'BEGIN { printf "%.2f", d / n }') per binary)"
# uprobe_multi: one link per program (3); single links: 2 descriptors per site (9 here).
per_binary=$([[ "$links" == *links=uprobe_multi* ]] && echo 3 || echo 18)
((fds_after - fds_before <= per_binary * bound + 16)) ||
  fail "the agent holds $((fds_after - fds_before)) more descriptors for $bound binaries (want <= $per_binary each)"

# A client of each binary, all at once, sending GETs for 2 s: both sides counted exactly where
# instrumented (a client of an instrumented file needs no slot), nothing where not. (Clients
# that live a while: one that exits before the agent has tracked it is not attributed to its
# container, which tests the inspection latency, not the budget.)
for i in $(seq 1 $binaries); do
  server_port="$(awk '/listening/ { print $2 }' "$tmp/server-$i.out")"
  "$tmp/bin/gtls-$i" load "$server_port" 2 10 >"$tmp/client-$i.out" 2>&1 &
  pids+=($!)
done
declare -A sent
for i in $(seq 1 $binaries); do
  wait_until 300 grep -q "^done " "$tmp/client-$i.out" || fail "gtls-$i client: $(cat "$tmp/client-$i.out")"
  sent[$i]="$(awk '/^done/ { print $2 }' "$tmp/client-$i.out")"
  ((sent[$i] > 0)) || fail "gtls-$i client sent nothing"
done
# requests_of METRICS I SIDE: gtls-I's requests on that side, all methods and statuses.
requests_of() {
  { grep "^container_go_tls_requests_total{.*container=\"gtls-$2\".*direction=\"$3\"" <<<"$1" || true; } |
    awk '{ n += $NF } END { print n + 0 }'
}
all_counted() {
  local m i side
  m="$(metrics)"
  for i in "${instrumented[@]}"; do
    for side in server client; do [[ "$(requests_of "$m" "$i" "$side")" == "${sent[$i]}" ]] || return 1; done
  done
}
wait_until 100 all_counted || true
m="$(metrics)"
for i in "${instrumented[@]}"; do
  for side in server client; do
    got="$(requests_of "$m" "$i" "$side")"
    [[ "$got" == "${sent[$i]}" ]] ||
      fail "gtls-$i $side requests: $got, want ${sent[$i]}: $(grep -E "container=\"gtls-$i\"|^sonde_agent_gotls_(unattr|map_full|not_inst)" <<<"$m")"
  done
done
for i in "${left_out[@]}"; do
  if grep -q "^container_go_tls_requests_total{.*container=\"gtls-$i\"" <<<"$m"; then
    fail "gtls-$i was left out but has request series"
  fi
done
echo "requests: each of the $bound instrumented binaries' clients and servers counted exactly" \
  "($(for i in "${instrumented[@]}"; do echo "${sent[$i]}"; done | sort -n | uniq -c | awk '{ printf "%s%s×%s", s, $1, $2; s=", " }') requests), none for the others"

kill "$poller"
poller=
polls="$(wc -l <"$tmp/polls")"
[[ ! -s "$tmp/poll-failures" ]] || fail "/metrics failed $(wc -l <"$tmp/poll-failures") of $polls polls: $(head -3 "$tmp/poll-failures")"
((polls >= 10)) || fail "only $polls polls of /metrics"
echo "/metrics answered all $polls polls"
