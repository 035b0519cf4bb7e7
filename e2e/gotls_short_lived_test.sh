#!/usr/bin/env bash
# Short-lived Go programs counted from their first request (issue 21): kubectl (a stripped Go
# 1.23 binary nobody here built) run 10 times in a row against a local Go TLS server, one request
# per run and no start delay, then 10 more times after the binary sat unused for a minute: every
# request counted, on both sides, without the binary's probes being attached again (they are
# kept after its last exit, --go-tls-keep-probes-seconds). And a Go server whose .go.buildinfo
# section was renamed away is instrumented (dated by its .gopclntab) and counted exactly.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
tmp="$SONDE_E2E_TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

command -v kubectl >/dev/null || fail "kubectl is not installed (a stripped Go 1.23 TLS client)"
mkdir -p "$tmp/bin"
go_build gotls "$tmp/bin/gotls"
ln -s gotls "$tmp/bin/server"
ln -s gotls "$tmp/bin/client"
cp "$(command -v kubectl)" "$tmp/bin/kubectl"
objcopy --rename-section .go.buildinfo=.go.renamed "$tmp/bin/gotls" "$tmp/bin/nobuildinfo"
readelf -S "$tmp/bin/nobuildinfo" | grep -q '\.go\.buildinfo' && fail "objcopy left .go.buildinfo"

# Only this test's programs (other Go programs on the machine would attach and detach too).
gotls_only_config "$tmp/agent.yaml" "$tmp/bin/*"
port="$(free_port)"
start_agent "$port" --config "$tmp/agent.yaml"
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
# sum_of REGEX: the sum of the exposition's samples whose line matches REGEX.
sum_of() { metrics | awk -v re="$1" '$0 ~ re { s += $NF } END { print s + 0 }'; }
ok_requests() { # ok_requests CONTAINER DIRECTION
  sum_of "^container_go_tls_requests_total\\{.*container=\"$1\".*direction=\"$2\".*status_class=\"2xx\""
}
start_gotls_server server "$port"

# kubectl_runs N: N runs of kubectl, one GET each, answered 200 (kubectl's discovery requests,
# answered 400 by this server, are not counted in 2xx).
kubectl_runs() {
  for _ in $(seq "$1"); do
    "$tmp/bin/kubectl" --server "https://127.0.0.1:$server_port" --insecure-skip-tls-verify \
      --token=x --cache-dir "$tmp/kube-cache" get --raw /status/200 >"$tmp/kubectl.out" 2>&1 ||
      fail "kubectl failed under the agent: $(cat "$tmp/kubectl.out")"
    grep -qx "status 200" "$tmp/kubectl.out" || fail "kubectl printed: $(cat "$tmp/kubectl.out")"
  done
}
# expect_counted N: kubectl's N requests on both sides, once the agent has folded its exits.
expect_counted() {
  wait_until 50 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^container_go_tls_requests_total\\{.*container=\"kubectl\".*direction=\"client\".*status_class=\"2xx\"/ { s += \$NF } END { print s + 0 }') -ge $1 ]]" || true
  local client server
  client="$(ok_requests kubectl client)"
  server="$(ok_requests server server)"
  echo "kubectl requests counted: client $client, server $server (want $1 each)"
  [[ "$client" == "$1" ]] || fail "kubectl: $client of $1 requests counted"
  [[ "$server" == "$1" ]] || fail "server: $server of $1 requests counted"
}
attaches() { sum_of '^sonde_agent_uprobe_attaches_total\{feature="gotls"\}'; }

kubectl_runs 10
expect_counted 10
grep -q '^sonde_agent_gotls_binaries{binary="'"$tmp"'/bin/kubectl".*instrumented="true".*stripped="true"' <<<"$(metrics)" ||
  fail "kubectl has no instrumented verdict: $(metrics | grep gotls_binaries)"
idle="$(sum_of '^sonde_agent_gotls_instrumented_binaries\{kind="idle"\}')"
[[ "$idle" == 1 ]] || fail "kubectl's probes are not kept after its exit (idle binaries: $idle)"
before="$(attaches)"
echo "kubectl sits unused for 61 s with its probes kept (attachments made so far: $before)"
sleep 61
kubectl_runs 10
expect_counted 20
[[ "$(attaches)" == "$before" ]] || fail "kubectl's probes were attached again: $before -> $(attaches)"
echo "unseen exits counted: $(sum_of '^sonde_agent_gotls_exited_unseen_processes_total')"

# No .go.buildinfo: a server instrumented from its function table, both sides counted exactly.
start_gotls_server nobuildinfo "$port"
verdict="$(metrics | grep '^sonde_agent_gotls_binaries{binary="'"$tmp"'/bin/nobuildinfo"')" ||
  fail "no verdict for the binary without .go.buildinfo"
echo "$verdict"
grep -q 'instrumented="true",reason="go1.18-1.19 (from .gopclntab; no .go.buildinfo)"' <<<"$verdict" ||
  fail "the binary without .go.buildinfo is not instrumented as Go 1.18-1.19"
codes=()
for _ in $(seq 30); do codes+=(200); done
out="$("$tmp/bin/client" client "$server_port" "${codes[@]}" 2>&1)" || fail "client: $out"
wait_until 50 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^container_go_tls_requests_total\\{.*container=\"nobuildinfo\".*status_class=\"2xx\"/ { s += \$NF } END { print s + 0 }') -ge 30 ]]" || true
got="$(ok_requests nobuildinfo server)"
echo "nobuildinfo server: $got of 30 requests counted"
[[ "$got" == 30 ]] || fail "nobuildinfo server: $got of 30 requests counted"
echo "PASS"
