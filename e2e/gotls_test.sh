#!/usr/bin/env bash
# Go TLS end to end: a Go HTTPS server and client built here with Debian's Go, N requests with
# known statuses, the agent's counts read through Prometheus; a Go program without TLS gets no
# probes and is parsed once; a stripped copy gets a "not instrumentable" reason and no retries.
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
export GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" CGO_ENABLED=0
mkdir -p "$tmp/bin"
(cd "$workloads/gotls" && go build -o "$tmp/bin/gotls" .) || fail "go build gotls"
(cd "$workloads/gotls" && go build -ldflags="-s -w" -o "$tmp/bin/gotls-stripped" .) ||
  fail "go build gotls (stripped)"
(cd "$workloads/gonotls" && go build -o "$tmp/bin/gonotls" .) || fail "go build gonotls"
ln -s gotls "$tmp/bin/gotls-server"
ln -s gotls "$tmp/bin/gotls-client"

port="$(free_port)"
start_agent "$port"
start_prometheus "$port"
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
metric=container_go_tls_requests_total

"$tmp/bin/gotls-server" server >"$tmp/server.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/server.out" || fail "server did not start"
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"

# 30 requests: 20 x 200, 6 x 404, 4 x 500, interleaved.
codes=()
for i in $(seq 0 29); do codes+=(200); done
for i in 1 6 11 16 21 26; do codes[$i]=404; done
for i in 3 13 23 28; do codes[$i]=500; done
want_2xx=0 want_4xx=0 want_5xx=0
for c in "${codes[@]}"; do
  case $c in 2*) want_2xx=$((want_2xx + 1)) ;; 4*) want_4xx=$((want_4xx + 1)) ;; 5*) want_5xx=$((want_5xx + 1)) ;; esac
done
# The client waits 300 ms before its first request: the agent instruments a new process a few
# ms after its exec, and this test counts every request.
GOTLS_START_DELAY_MS=300 "$tmp/bin/gotls-client" client "$server_port" "${codes[@]}" >"$tmp/client.out" 2>&1 ||
  fail "client failed: $(cat "$tmp/client.out")"
echo "client: $(cat "$tmp/client.out"); want 2xx=$want_2xx 4xx=$want_4xx 5xx=$want_5xx"

sleep 2.5  # two scrapes
for side in client server; do
  for class in 2xx 4xx 5xx; do
    want="want_${class}"
    got="$(prom_query "sum($metric{container=\"gotls-$side\",direction=\"$side\",status_class=\"$class\"})")"
    echo "$side $class: $got (want ${!want})"
    [[ "$got" == "${!want}" ]] || fail "$side $class requests: $got, want ${!want}"
  done
  total="$(prom_query "sum($metric{container=\"gotls-$side\"})")"
  [[ "$total" == 30 ]] || fail "$side: $total requests in all, want exactly 30"
  count="$(prom_query "container_go_tls_request_duration_seconds_count{container=\"gotls-$side\"}")"
  under_1s="$(prom_query "container_go_tls_request_duration_seconds_bucket{container=\"gotls-$side\",le=\"1\"}")"
  sum="$(prom_query "container_go_tls_request_duration_seconds_sum{container=\"gotls-$side\"}")"
  echo "$side latency: $count requests, $under_1s under 1 s, sum $sum s"
  [[ "$count" == 30 && "$under_1s" == 30 ]] || fail "$side durations: count $count, under 1 s $under_1s"
  at_least "$sum" 0.000001 || fail "$side durations sum to $sum"
done
# Bytes: what one side wrote, the other read.
c_w="$(prom_query "container_go_tls_written_bytes_total{container=\"gotls-client\"}")"
s_r="$(prom_query "container_go_tls_read_bytes_total{container=\"gotls-server\"}")"
echo "bytes: client wrote $c_w, server read $s_r"
[[ "$c_w" == "$s_r" ]] && at_least "$c_w" 1000 || fail "client wrote $c_w bytes, server read $s_r"
# No plaintext in the exposition: a request path never appears in the agent's output.
! metrics | grep -q "/status/" || fail "plaintext leaked into /metrics"

parses() { metrics | awk '/^sonde_agent_symbol_cache_parses_total / { print $2 }'; }
attachments() { metrics | awk '/^sonde_agent_uprobe_attachments\{feature="gotls"\} / { print $2 }'; }

# A Go program without crypto/tls: one parse for its first run, none after, no probes.
before_parses="$(parses)" before_attach="$(attachments)"
for _ in 1 2 3; do "$tmp/bin/gonotls" >/dev/null; done
after_parses="$(parses)" after_attach="$(attachments)"
echo "gonotls x3: parses $before_parses -> $after_parses, gotls attachments $before_attach -> $after_attach"
[[ $((after_parses - before_parses)) == 1 ]] || fail "gonotls parsed $((after_parses - before_parses)) times, want 1"
[[ "$after_attach" == "$before_attach" ]] || fail "gonotls got probes"

# A stripped copy: a clear reason, and no retries when it runs again.
"$tmp/bin/gotls-stripped" server >"$tmp/stripped1.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/stripped1.out" || fail "stripped server did not start"
wait_until 50 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q 'sonde_agent_gotls_binaries{binary=\"$tmp/bin/gotls-stripped\",instrumented=\"false\",reason=\"stripped'" ||
  fail "no 'stripped' verdict for the stripped binary: $(metrics | grep gotls_binaries)"
p1="$(parses)"
"$tmp/bin/gotls-stripped" server >"$tmp/stripped2.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/stripped2.out" || fail "second stripped server did not start"
p2="$(parses)"
[[ "$p1" == "$p2" ]] || fail "the stripped binary was parsed again ($p1 -> $p2)"
metrics | grep '^sonde_agent_gotls_binaries'
echo "gotls: ok"
