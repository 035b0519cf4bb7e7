#!/usr/bin/env bash
# Go TLS over HTTP/2, end to end against real peers: a Go net/http server over TLS (HTTP/2 by
# ALPN) built here with Debian's Go, and as its clients curl --http2 (nghttp2), Go's own HTTP/2
# client (sequential requests, then 2 rounds of 60 concurrent streams on one connection) and
# kubectl (a stripped Go 1.23 binary). Counts per protocol, status class and method are checked
# exactly through Prometheus against what the peers themselves say (the server logs every
# request it answers; the clients print every status). Latency: the agent's mean duration of the
# held streams against the client's own mean. A sustained run on one connection is counted
# exactly with no kernel map full and nothing lost. No plaintext leaves: no request path appears
# in /metrics. gRPC: a grpc-go server and client built from Debian's golang-google-grpc-dev,
# unary, streaming and cancelled calls counted exactly by gRPC code. A connection older than the
# agent counts as unparsed, its streams not at all.
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

mkdir -p "$tmp/bin"
go_build gotls "$tmp/bin/gotls"
# The container label is the program name in standalone mode.
for role in server client streams rate; do ln -s gotls "$tmp/bin/h2-$role"; done

port="$(free_port)"
start_agent "$port"
start_prometheus "$port"
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
metric=container_go_tls_requests_total

"$tmp/bin/h2-server" -h2 -log server >"$tmp/server.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/server.out" || fail "the server did not start"
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"h2-server\".*} 1'" ||
  fail "the agent does not track h2-server: $(metrics | grep gotls_processes)"

# q EXPR: a Prometheus query's value, 0 when empty.
q() { prom_query "sum($1) or vector(0)"; }
# server_log_count METHOD CLASS: requests the server says it answered (its own log).
server_log_count() {
  awk -v m="$1" -v c="$2" '$1 == "request" && $4 == "HTTP/2.0" && (m == "" || $2 == m) &&
    substr($3, 1, 1) == substr(c, 1, 1) { n++ } END { print n + 0 }' "$tmp/server.out"
}
# check_server: the server's counts by method and status class equal its own log, all HTTP/2.
check_server() {
  local m c got want
  sleep 2.5 # two scrapes
  for m in GET POST HEAD; do
    for c in 2xx 4xx 5xx; do
      got="$(q "$metric{container=\"h2-server\",direction=\"server\",method=\"$m\",status_class=\"$c\",protocol=\"http2\"}")"
      want="$(server_log_count "$m" "$c")"
      [[ "$got" == "$want" ]] || fail "h2-server $m $c: counted $got, the server answered $want"
    done
  done
  got="$(q "$metric{container=\"h2-server\"}")"
  want="$(grep -c '^request ' "$tmp/server.out")"
  echo "h2-server: $got requests counted, $want answered"
  [[ "$got" == "$want" ]] || fail "h2-server: counted $got requests, the server answered $want"
  got="$(q "$metric{container=\"h2-server\",protocol!=\"http2\"}")"
  [[ "$got" == 0 ]] || fail "h2-server: $got requests counted as another protocol"
}

# 1. Go's HTTP/2 client, one connection, sequential requests with known statuses.
reqs=(200 200 404 200 500 POST:201 200 404 POST:503 200)
out="$("$tmp/bin/h2-client" -h2 client "$server_port" "${reqs[@]}")" || fail "h2-client failed: $out"
[[ "$(tail -1 <<<"$out")" == "done ${#reqs[@]}" ]] || fail "h2-client printed $out"
check_server
for want in GET:2xx:5 GET:4xx:2 GET:5xx:1 POST:2xx:1 POST:5xx:1; do
  IFS=: read -r m c n <<<"$want"
  got="$(q "$metric{container=\"h2-client\",direction=\"client\",method=\"$m\",status_class=\"$c\",protocol=\"http2\"}")"
  echo "h2-client $m $c: $got (want $n)"
  [[ "$got" == "$n" ]] || fail "h2-client $m $c: counted $got, want $n"
done
[[ "$(q "$metric{container=\"h2-client\"}")" == "${#reqs[@]}" ]] || fail "h2-client: not exactly ${#reqs[@]} requests"
[[ "$(q "container_go_tls_http2_connections_total{container=\"h2-client\"}")" == 1 ]] ||
  fail "h2-client: not one HTTP/2 connection"

# 2. curl (nghttp2): several requests on one connection, a POST with a body, statuses known.
curl_args=()
for code in 200 200 404 502; do curl_args+=(-o /dev/null "https://127.0.0.1:$server_port/status/$code"); done
curl_out="$(curl -sk --http2 -w '%{http_version} %{http_code}\n' "${curl_args[@]}")"
curl_out+=$'\n'"$(curl -sk --http2 -o /dev/null -w '%{http_version} %{http_code}\n' -X POST \
  --data-binary @"$tmp/server.out" "https://127.0.0.1:$server_port/status/201")"
echo "curl: $(tr '\n' ' ' <<<"$curl_out")"
[[ "$(awk '$1 == "2"' <<<"$curl_out" | wc -l)" == 5 ]] || fail "curl did not speak HTTP/2: $curl_out"
check_server

# 3. Concurrent streams: 2 rounds of 60 requests in flight at once on one connection (the
# server holds each for 100 ms), plus the HEAD that opens the connection.
codes=()
for i in $(seq 1 30); do codes+=(200); done
for i in $(seq 1 20); do codes+=(404); done
for i in $(seq 1 10); do codes+=(POST:500); done
out="$("$tmp/bin/h2-streams" -h2 streams "$server_port" 2 "${codes[@]}")" || fail "h2-streams: $out"
[[ "$(head -1 <<<"$out")" == "done 121" ]] || fail "h2-streams printed $out"
check_server
for want in GET:2xx:60 GET:4xx:40 POST:5xx:20 HEAD:2xx:1; do
  IFS=: read -r m c n <<<"$want"
  got="$(q "$metric{container=\"h2-streams\",direction=\"client\",method=\"$m\",status_class=\"$c\",protocol=\"http2\"}")"
  echo "h2-streams $m $c: $got (want $n)"
  [[ "$got" == "$n" ]] || fail "h2-streams $m $c: counted $got, want $n"
done
# Latency: the agent's mean duration on the client side against the client's own mean of the
# held streams; the one unheld HEAD among 121 moves the agent's mean by under 1%. The held
# durations are tight, so mean and median agree (both printed); the histogram's buckets are too
# coarse to read a median from.
client_mean_us="$(awk '/^mean_us/ { print $2 }' <<<"$out")"
client_median_us="$(awk '/^median_us/ { print $2 }' <<<"$out")"
dsum="$(q "container_go_tls_request_duration_seconds_sum{container=\"h2-streams\"}")"
dcount="$(q "container_go_tls_request_duration_seconds_count{container=\"h2-streams\"}")"
agent_mean_us="$(awk -v s="$dsum" -v n="$dcount" 'BEGIN { printf "%d", s * 1e6 / n }')"
echo "latency: client mean ${client_mean_us} us, median ${client_median_us} us; agent mean ${agent_mean_us} us"
awk -v a="$agent_mean_us" -v c="$client_mean_us" 'BEGIN { d = a - c; if (d < 0) d = -d; exit !(d <= 0.1 * c) }' ||
  fail "agent mean ${agent_mean_us} us is not within 10% of the client's ${client_mean_us} us"

# 4. kubectl (stripped Go 1.23, its own HTTP/2 client): the server counts each of its requests.
if command -v kubectl >/dev/null; then
  for path in /status/200 /status/200 /status/200 /status/404; do
    kubectl --server "https://127.0.0.1:$server_port" --insecure-skip-tls-verify --token=x \
      get --raw "$path" >/dev/null 2>&1 || true
  done
  check_server
  # kubectl's own side is counted only if its probes beat its first request (issue 21 part 5):
  # whatever is counted must be a status it received.
  kgot="$(q "$metric{container=\"kubectl\",status_class!~\"2xx|4xx\"}")"
  [[ "$kgot" == 0 ]] || fail "kubectl: $kgot requests with a status it never got"
  echo "kubectl: $(q "$metric{container=\"kubectl\"}") of its requests counted on its side"
fi

# 5. Sustained: one connection, 8 goroutines at 8,000 requests/s in all for 5 s, every stream
# counted on both sides, nothing lost, no kernel map or ring buffer full. Paced: back to back, the
# client and server outrun this sanitizer build's drainer on 2 cores at 14,000-18,000 requests/s
# (measured here: streams lost then, with or without the per-process share of the ring buffer);
# the release build's ceiling is bench/gotls/http2.sh's.
server_before="$(q "$metric{container=\"h2-server\"}")"
out="$("$tmp/bin/h2-rate" -h2 rate "$server_port" 5 8000)" || fail "h2-rate: $out"
sent="$(awk '/^done/ { print $2 }' <<<"$out")"
sleep 2.5
got_client="$(q "$metric{container=\"h2-rate\"}")"
got_server="$(q "$metric{container=\"h2-server\"}")"
echo "rate: $sent requests in 5 s; counted client $got_client, server $((got_server - server_before))"
[[ "$got_client" == "$sent" ]] || fail "h2-rate: counted $got_client of $sent"
[[ $((got_server - server_before)) == "$sent" ]] || fail "h2-server: counted $((got_server - server_before)) of $sent"
full="$(metrics | awk '/^sonde_agent_gotls_map_full_total/ { s += $2 } END { print s + 0 }')"
[[ "$full" == 0 ]] || fail "kernel maps full or HTTP/2 bounds hit: $(metrics | grep map_full)"
for outcome in unparsed malformed lost evicted; do
  n="$(metrics | awk -v o="$outcome" '$1 == "sonde_agent_gotls_http2_connections_total{outcome=\"" o "\"}" { print $2 }')"
  [[ "$n" == 0 ]] || fail "$n HTTP/2 connections $outcome"
done

# 6. A header block over the kernel's bound (a 24 KB header: Go's client sends it in one HEADERS
# frame, as the Go server allows 1 MiB frames): both sides give the connection up, counted
# (h2_frame_bytes, lost), and nothing after it is counted, nothing wrong either.
server_before="$(q "$metric{container=\"h2-server\"}")"
out="$("$tmp/bin/h2-client" -h2 client "$server_port" 200 404 GET+big:200 200 500)" || fail "h2-client (big): $out"
sleep 2.5
got_client="$(q "$metric{container=\"h2-client\"}")"
got_server="$(q "$metric{container=\"h2-server\"}")"
echo "oversized header block: client counted $((got_client - ${#reqs[@]})), server $((got_server - server_before)) (2 each before it)"
[[ $((got_client - ${#reqs[@]})) == 2 && $((got_server - server_before)) == 2 ]] ||
  fail "oversized header block: counted client $((got_client - ${#reqs[@]})), server $((got_server - server_before)), want 2 and 2"
bound="$(metrics | awk '$1 == "sonde_agent_gotls_map_full_total{map=\"h2_frame_bytes\",reason=\"map_full\"}" { print $2 }')"
lost="$(metrics | awk '$1 == "sonde_agent_gotls_http2_connections_total{outcome=\"lost\"}" { print $2 }')"
[[ "$bound" == 2 && "$lost" == 2 ]] || fail "oversized header block: bound hit $bound times, $lost connections lost; want 2 and 2"

# 7. gRPC: a real grpc-go (Debian's golang-google-grpc-dev 1.33) server and client over TLS,
# unary and server-streaming calls with known codes, 60 unary calls at once on one connection,
# and streaming calls the client cancels (RST_STREAM: reset on both sides, no grpc-status).
(cd "$workloads/gogrpc" && GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOCACHE="$E2E_GOCACHE" CGO_ENABLED=0 go build -o "$tmp/bin/gogrpc" .) ||
  fail "go build gogrpc (golang-google-grpc-dev installed?)"
for role in server client; do ln -s gogrpc "$tmp/bin/grpc-$role"; done
"$tmp/bin/grpc-server" server >"$tmp/grpc-server.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/grpc-server.out" || fail "grpc-server did not start"
grpc_port="$(awk '/listening/ { print $2 }' "$tmp/grpc-server.out")"
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"grpc-server\".*} 1'" ||
  fail "the agent does not track grpc-server"
out="$("$tmp/bin/grpc-client" client "$grpc_port" check:0 check:0 check:5 check:14 watch:3:0 \
  watch:5:13 check:16 cancel:3 cancel:1)" || fail "grpc-client: $out"
want_out=$'OK\nOK\nNotFound\nUnavailable\nOK 3\nInternal 5\nUnauthenticated\nCanceled 3\nCanceled 1\ndone 9'
[[ "$out" == "$want_out" ]] || fail "grpc-client printed '$out', want '$want_out'"
out="$("$tmp/bin/grpc-client" client "$grpc_port" -parallel 60 check:0)" || fail "grpc-client -parallel: $out"
[[ "$out" == "done 60" ]] || fail "grpc-client -parallel printed $out"
sleep 2.5
for side in client server; do
  for want in OK:2xx:63 NOT_FOUND:2xx:1 UNAVAILABLE:2xx:1 INTERNAL:2xx:1 UNAUTHENTICATED:2xx:1 :reset:2; do
    IFS=: read -r code class n <<<"$want"
    got="$(q "$metric{container=\"grpc-$side\",direction=\"$side\",protocol=\"grpc\",method=\"POST\",grpc_code=\"$code\",status_class=\"$class\"}")"
    echo "grpc-$side ${code:-(none)} $class: $got (want $n)"
    [[ "$got" == "$n" ]] || fail "grpc-$side ${code:-(none)} $class: counted $got, want $n"
  done
  got="$(q "$metric{container=\"grpc-$side\"}")"
  [[ "$got" == 69 ]] || fail "grpc-$side: counted $got calls, want exactly 69"
done

# Read whole first: with pipefail, `grep -q` stopping at a match breaks curl's pipe, and the
# pipeline would fail (passing this check) exactly when the plaintext is there.
exposition="$(metrics)" || fail "no /metrics"
! grep -q "/status/" <<<"$exposition" || fail "plaintext leaked into /metrics"

# 8. Joined midway: a server and a client whose HTTP/2 connection predates the agent (started
# while no agent runs, the client sending on it throughout). Its preface and HPACK history are
# gone, so its streams must not be counted (never a guessed status); each side's connection
# counts once as unparsed.
stop_agent
ln -s gotls "$tmp/bin/early-server"
ln -s gotls "$tmp/bin/early-client"
"$tmp/bin/early-server" -h2 server >"$tmp/early-server.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/early-server.out" || fail "early-server did not start"
early_port="$(awk '/listening/ { print $2 }' "$tmp/early-server.out")"
"$tmp/bin/early-client" -h2 rate "$early_port" 12 >"$tmp/early-client.out" 2>&1 &
early_client=$!
pids+=($early_client)
sleep 1
start_agent "$port"
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"early-client\".*} 1'" ||
  fail "the agent does not track early-client"
sleep 3
unparsed="$(metrics | awk '$1 == "sonde_agent_gotls_http2_connections_total{outcome=\"unparsed\"}" { print $2 }')"
counted="$(metrics | awk '/^container_go_tls_requests_total\{.*container="early-(client|server)"/ { s += $NF } END { print s + 0 }')"
echo "joined midway: $unparsed connections unparsed, $counted requests counted"
[[ "$unparsed" == 2 ]] || fail "joined midway: $unparsed connections unparsed, want 2 (one per side)"
[[ "$counted" == 0 ]] || fail "joined midway: $counted requests counted on a connection without its start"
wait "$early_client" || fail "early-client failed under the agent: $(cat "$tmp/early-client.out")"
echo "gotls_http2: ok"
