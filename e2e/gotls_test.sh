#!/usr/bin/env bash
# Go TLS end to end: Go HTTPS servers and clients built here with Debian's Go (one with
# symbols, one stripped with -ldflags='-s -w'), requests with known methods and statuses
# (100-continue, 103 Early Hints, an unlisted method), counted exactly through Prometheus; each
# client starts its requests right after exec and must exit 0 with the expected output; a
# sustained load loses no exchange; a Go program without TLS gets no probes and is parsed once.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
tmp="$SONDE_E2E_TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_prometheus
  stop_agent
}
trap cleanup EXIT

# Offline builds: standard library only, caches in the scratch folder.
mkdir -p "$tmp/bin"
go_build gotls "$tmp/bin/gotls"
go_build gotls "$tmp/bin/gotls-stripped" -ldflags="-s -w"
go_build gonotls "$tmp/bin/gonotls"
readelf -S "$tmp/bin/gotls-stripped" | grep -q '\.symtab' && fail "the stripped build has a .symtab"
# The container label is the program name in standalone mode.
for role in server client load calls; do ln -s gotls "$tmp/bin/gotls-$role"; done
for role in server client; do ln -s gotls-stripped "$tmp/bin/stripped-$role"; done

port="$(free_port)"
start_agent "$port"
start_prometheus "$port"
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
metric=container_go_tls_requests_total

# 34 requests: 20 GET 200, 6 GET 404, 4 GET 500 interleaved, then 2 POSTs with
# "Expect: 100-continue" (1xx interim + 201), one GET preceded by 103 Early Hints, and one
# PROPFIND (an unlisted method, counted as OTHER).
reqs=()
for i in $(seq 0 29); do reqs+=(200); done
for i in 1 6 11 16 21 26; do reqs[$i]=404; done
for i in 3 13 23 28; do reqs[$i]=500; done
reqs+=(POST+continue:201 POST+continue:201 GET+early:200 PROPFIND:207)
want_1xx=0 want_2xx=24 want_4xx=6 want_5xx=4 want_total=34
want_output="$(for r in "${reqs[@]}"; do echo "${r##*:}"; done; echo "done ${#reqs[@]}")"

# check_exchanges SERVER CLIENT: both sides' counts by status class and method.
check_exchanges() {
  local server="$1" client="$2"
  start_gotls_server "$server" "$port"
  # Right after exec, no delay: the probes on the file are already there.
  local out
  out="$("$tmp/bin/$client" client "$server_port" "${reqs[@]}" 2>&1)" ||
    fail "$client exited $? under the agent: $out"
  [[ "$out" == "$want_output" ]] || fail "$client printed '$out', want '$want_output'"
  echo "$client: exit 0, output as expected"
  sleep 2.5 # two scrapes
  local side name got want
  for side in client server; do
    name="$([[ $side == client ]] && echo "$client" || echo "$server")"
    for class in 1xx 2xx 4xx 5xx; do
      want="want_${class}"
      got="$(prom_query "sum($metric{container=\"$name\",direction=\"$side\",status_class=\"$class\"}) or vector(0)")"
      echo "$name $class: $got (want ${!want})"
      [[ "$got" == "${!want}" ]] || fail "$name $class requests: $got, want ${!want}"
    done
    got="$(prom_query "sum($metric{container=\"$name\"})")"
    [[ "$got" == "$want_total" ]] || fail "$name: $got requests in all, want exactly $want_total"
    for m in GET:31 POST:2 OTHER:1; do
      got="$(prom_query "sum($metric{container=\"$name\",method=\"${m%%:*}\"})")"
      [[ "$got" == "${m##*:}" ]] || fail "$name ${m%%:*} requests: $got, want ${m##*:}"
    done
    local count under_1s sum
    count="$(prom_query "container_go_tls_request_duration_seconds_count{container=\"$name\"}")"
    under_1s="$(prom_query "container_go_tls_request_duration_seconds_bucket{container=\"$name\",le=\"1\"}")"
    sum="$(prom_query "container_go_tls_request_duration_seconds_sum{container=\"$name\"}")"
    echo "$name latency: $count requests, $under_1s under 1 s, sum $sum s"
    [[ "$count" == "$want_total" && "$under_1s" == "$want_total" ]] ||
      fail "$name durations: count $count, under 1 s $under_1s"
    at_least "$sum" 0.000001 || fail "$name durations sum to $sum"
  done
  # Bytes: what one side wrote, the other read.
  local c_w s_r
  c_w="$(prom_query "container_go_tls_written_bytes_total{container=\"$client\"}")"
  s_r="$(prom_query "container_go_tls_read_bytes_total{container=\"$server\"}")"
  echo "bytes: $client wrote $c_w, $server read $s_r"
  [[ "$c_w" == "$s_r" ]] && at_least "$c_w" 8000 || fail "$client wrote $c_w bytes, $server read $s_r"
}

check_exchanges gotls-server gotls-client
check_exchanges stripped-server stripped-client
# No plaintext in the exposition: a request path never appears in the agent's output.
# Read whole first (never `metrics | grep -q`: with pipefail, grep stopping at a match breaks
# curl's pipe and fails the pipeline exactly when the text is there).
exposition="$(metrics)" || fail "no /metrics"
! grep -q "/status/" <<<"$exposition" || fail "plaintext leaked into /metrics"

# Both binaries instrumented, the stripped one through .gopclntab, with the probe kinds shown.
metrics | grep '^sonde_agent_gotls_binaries'
# (grep reads a copy: `metrics | grep -q` under pipefail fails when grep stops reading first.)
exposition="$(metrics)"
for b in gotls gotls-stripped; do
  stripped="$([[ $b == gotls ]] && echo false || echo true)"
  grep -q "^sonde_agent_gotls_binaries{binary=\"$tmp/bin/$b\",build_id=\"[0-9a-f]*\",instrumented=\"true\",reason=\"go[0-9.]*\",stripped=\"$stripped\",entry_probe=\"emulated-jump\",return_probe=\"\(bpf-ret\|single-step\)\"}" <<<"$exposition" ||
    fail "$b: no instrumented verdict with emulated entry probes"
done

# Sustained load as fast as one keep-alive connection goes (to the last server started, the
# stripped one): every exchange counted on both sides, no kernel map ever full.
server_before="$(prom_query "sum($metric{container=\"stripped-server\"})")"
load_out="$("$tmp/bin/gotls-load" load "$server_port" 5 100000)" || fail "load client failed: $load_out"
sent="$(awk '/^done/ { print $2 }' <<<"$load_out")"
sleep 2.5
got_client="$(prom_query "sum($metric{container=\"gotls-load\"})")"
got_server="$(prom_query "sum($metric{container=\"stripped-server\"})")"
echo "load: $sent requests in 5 s; counted client $got_client, server $((got_server - server_before))"
at_least "$sent" 1000 || fail "load sent only $sent requests"
[[ "$got_client" == "$sent" ]] || fail "load client: counted $got_client of $sent"
[[ $((got_server - server_before)) == "$sent" ]] || fail "server: counted $((got_server - server_before)) of $sent"
full="$(metrics | awk '/^sonde_agent_gotls_map_full_total/ { s += $2 } END { print s + 0 }')"
[[ "$full" == 0 ]] || fail "kernel maps were full $full times: $(metrics | grep map_full)"

# Probe hits: one per crypto/tls call, against the calls the client says it made itself; the
# estimated CPU they added is hits × the costs the agent measured at start.
calls_out="$("$tmp/bin/gotls-calls" calls "$server_port" 500)" || fail "calls client failed: $calls_out"
read -r _ _ _ writes _ reads <<<"$calls_out"
sleep 2.5
entry="$(prom_query 'sum(container_go_tls_probe_hits_total{container="gotls-calls",site="entry"})')"
returns="$(prom_query 'sum(container_go_tls_probe_hits_total{container="gotls-calls",site="return"})')"
probe_cpu="$(prom_query 'container_go_tls_probe_cpu_seconds_total{container="gotls-calls"}')"
echo "probe hits: $writes writes + $reads reads; entry hits $entry, return hits $returns, estimated $probe_cpu s"
[[ "$entry" == $((writes + reads)) && "$returns" == "$reads" ]] ||
  fail "probe hits: entry $entry (want $((writes + reads))), return $returns (want $reads)"
at_least "$probe_cpu" 0.000001 || fail "estimated probe CPU $probe_cpu"

parses() { metrics | awk '/^sonde_agent_symbol_cache_parses_total / { print $2 }'; }
attachments() { metrics | awk '/^sonde_agent_uprobe_attachments\{feature="gotls"\} / { print $2 }'; }

# A Go program without crypto/tls: after its first run, no parse and no probe when it runs
# again. Other processes on a shared machine (a `go build` elsewhere) move the same counters,
# so a disturbed measurement is repeated.
"$tmp/bin/gonotls" >/dev/null
sleep 0.5
clean=
for attempt in 1 2 3 4 5; do
  before_parses="$(parses)" before_attach="$(attachments)"
  for _ in 1 2 3; do "$tmp/bin/gonotls" >/dev/null; done
  sleep 0.3
  after_parses="$(parses)" after_attach="$(attachments)"
  echo "gonotls x3 (attempt $attempt): parses $before_parses -> $after_parses, gotls attachments $before_attach -> $after_attach"
  if [[ "$after_parses" == "$before_parses" && "$after_attach" == "$before_attach" ]]; then
    clean=1
    break
  fi
  sleep 2
done
[[ -n "$clean" ]] || fail "gonotls was parsed again or got probes in every attempt"
exposition="$(metrics)" || fail "no /metrics"
! grep -q 'sonde_agent_gotls_binaries{binary="[^"]*gonotls"' <<<"$exposition" ||
  fail "gonotls has a Go TLS verdict"
echo "gotls: ok"
