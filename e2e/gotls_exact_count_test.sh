#!/usr/bin/env bash
# Each Go TLS exchange counted once, whatever the timing (issue 31): 500 short-lived client runs
# against a local Go TLS server, with 2 busy loops (in their own cgroup) contending for the CPUs,
# every client exiting the instant its response is in, read exactly on both sides.
#   - 400 runs back to back, one in five of kubectl (a stripped Go 1.23 binary; GET answered 404),
#     the others of the repo's client (one request each, statuses 200/404/500 in turn): their files
#     keep their probes between runs (--go-tls-keep-probes-seconds), so each process is counted by
#     the kernel from its first call, and many exit before the agent has even read them in /proc;
#   - 5 times, the client binary's probes expire (detached after 2 s unused) and the next run
#     waits until the agent tracks it (-await), then 19 more runs back to back: 100 runs.
# Truth: each client prints the statuses it got; the server logs every request it answers.
# kubectl's first run also asks GET /version (answered 400), once per cache directory: a real
# request, counted on both sides like the others.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
tmp="$SONDE_E2E_TMP"
pids=()
busy_cg=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n "$busy_cg" ]]; then remove_cgroup "$busy_cg"; fi
  stop_agent
}
trap cleanup EXIT

[[ $EUID -eq 0 ]] || fail "needs root (BPF and cgroups)"
command -v kubectl >/dev/null || fail "kubectl is not installed (a stripped Go 1.23 TLS client)"
mkdir -p "$tmp/bin"
go_build gotls "$tmp/bin/gotls"
ln -s gotls "$tmp/bin/server"
cp "$tmp/bin/gotls" "$tmp/bin/client" # a file of its own: its probes come and go with its runs
cp "$(command -v kubectl)" "$tmp/bin/kubectl"

gotls_only_config "$tmp/agent.yaml" "$tmp/bin/*"
port="$(free_port)"
start_agent "$port" --config "$tmp/agent.yaml" --go-tls-keep-probes-seconds 2
metrics() { curl -sf "http://127.0.0.1:$port/metrics"; }
sum_of() { metrics | awk -v re="$1" '$0 ~ re { s += $NF } END { print s + 0 }'; }
# requests CONTAINER DIRECTION [STATUS_CLASS]
requests() {
  sum_of "^container_go_tls_requests_total\\{.*container=\"$1\".*direction=\"$2\".*status_class=\"${3:-}"
}
"$tmp/bin/server" -log server >"$tmp/server.out" 2>&1 &
pids+=($!)
wait_until 100 grep -q listening "$tmp/server.out" || fail "the server did not start"
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"server\".*} 1'" ||
  fail "the agent does not track the server"

busy_cg="$(cgroup_v2_dir "sonde-e2e-busy-$$")"
mkdir -p "$busy_cg"
for _ in 1 2; do
  bash -c 'echo $$ >"$0/cgroup.procs" && exec bash -c "while :; do :; done"' "$busy_cg" &
  pids+=($!)
done

declare -A want=([2xx]=0 [4xx]=0 [5xx]=0) # the client binary's, by status class
codes=(200 404 500)
# client_run N [ARGS...]: one run of the client, its request answered codes[N % 3].
client_run() {
  local code="${codes[$(($1 % 3))]}" out
  shift
  out="$("$tmp/bin/client" "$@" client "$server_port" "$code" 2>&1)" || fail "client: $out"
  [[ "$out" == "$code"$'\n'"done 1" ]] || fail "client printed '$out', want $code"
  want[${code:0:1}xx]=$((want[${code:0:1}xx] + 1))
}
kubectl_runs=0
kubectl_run() {
  "$tmp/bin/kubectl" --server "https://127.0.0.1:$server_port" --insecure-skip-tls-verify \
    --token=x --cache-dir "$tmp/kube-cache" get --raw /status/404 >"$tmp/kubectl.out" 2>&1 &&
    fail "kubectl exited 0 on a 404: $(cat "$tmp/kubectl.out")"
  grep -q NotFound "$tmp/kubectl.out" || fail "kubectl printed: $(cat "$tmp/kubectl.out")"
  kubectl_runs=$((kubectl_runs + 1))
}
attaches() { sum_of '^sonde_agent_uprobe_attaches_total\{feature="gotls"\}'; }
idle() { sum_of '^sonde_agent_gotls_instrumented_binaries\{kind="idle"\}'; }
# awaited_run WHAT: one run of the client (answered 200) that dials once the agent tracks it: its
# file's probes are attached then (a never-seen file's first calls are not counted, docs/go-tls.md).
awaited_run() {
  rm -f "$tmp/go"
  "$tmp/bin/client" -await "$tmp/go" client "$server_port" 200 >"$tmp/await.out" 2>&1 &
  local waiter=$!
  pids+=("$waiter")
  wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"client\".*} 1'" ||
    fail "$1: the agent does not track the client"
  touch "$tmp/go"
  wait "$waiter" || fail "$1: client: $(cat "$tmp/await.out")"
  [[ "$(cat "$tmp/await.out")" == $'200\ndone 1' ]] || fail "$1: client printed: $(cat "$tmp/await.out")"
  want[2xx]=$((want[2xx] + 1))
}

start=$SECONDS
# kubectl's file gets its probes first, from a run that never gets to send a request (a peer that
# never answers its TLS handshake), killed once the agent tracks it.
python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$tmp/mute.out" &
pids+=($!)
wait_until 50 grep -q . "$tmp/mute.out" || fail "the mute listener did not start"
"$tmp/bin/kubectl" --server "https://127.0.0.1:$(cat "$tmp/mute.out")" --insecure-skip-tls-verify \
  --token=x get --raw /status/404 >/dev/null 2>&1 &
pids+=($!)
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"kubectl\".*} 1'" ||
  fail "the agent does not track kubectl"
kill "${pids[-1]}"
awaited_run "the first run"
kept="$(attaches)"
for i in $(seq 1 399); do
  if ((i % 5 == 0)); then kubectl_run; else client_run "$i"; fi
done
echo "kept probes: $((400 - kubectl_runs)) client runs, $kubectl_runs kubectl runs in $((SECONDS - start)) s"

# Wait until the agent has folded every exit (it reads the kernel's counts of a process at its
# exit), then check that no file's probes were attached again (no linger expired): 400 runs.
expect_counts() {
  local what="$1" c2 c4 c5
  wait_until 150 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^container_go_tls_requests_total\\{.*container=\"client\".*direction=\"client\"/ { s += \$NF } END { print s + 0 }') -ge $((want[2xx] + want[4xx] + want[5xx])) ]]" || true
  sleep 1 # one more fold would show as an over-count now
  c2="$(requests client client 2xx)" c4="$(requests client client 4xx)" c5="$(requests client client 5xx)"
  echo "$what: client side 2xx $c2 4xx $c4 5xx $c5 in $(requests client client) (want ${want[2xx]} ${want[4xx]} ${want[5xx]})"
  [[ "$c2" == "${want[2xx]}" && "$c4" == "${want[4xx]}" && "$c5" == "${want[5xx]}" ]] ||
    fail "$what: the client's requests are not counted exactly"
  [[ "$(requests client client)" == $((want[2xx] + want[4xx] + want[5xx])) ]] ||
    fail "$what: the client has requests of other classes: $(metrics | grep 'container="client"' | grep requests_total)"
  local served logged kubectl_want
  logged="$(grep -c '^request ' "$tmp/server.out")"
  served="$(requests server server)"
  echo "$what: server side $served, the server logged $logged"
  [[ "$served" == "$logged" ]] || fail "$what: the server answered $logged requests, $served counted"
  # kubectl's requests are what the server answered that the client did not ask.
  kubectl_want=$((logged - want[2xx] - want[4xx] - want[5xx]))
  echo "$what: kubectl $(requests kubectl client 4xx) (want $kubectl_want: $kubectl_runs runs and its /version request)"
  [[ "$(requests kubectl client 4xx)" == "$kubectl_want" && "$(requests kubectl client)" == "$kubectl_want" ]] ||
    fail "$what: kubectl's requests are not counted exactly"
  ((kubectl_want >= kubectl_runs && kubectl_want <= kubectl_runs + 1)) ||
    fail "$what: kubectl made $kubectl_want requests in $kubectl_runs runs"
}
expect_counts "probes kept"
[[ "$(attaches)" == "$kept" ]] || fail "probes were attached again while runs followed each other: $kept -> $(attaches)"

# The linger expires between runs: 5 rounds of one run that waits for its probes, then 19.
for round in 1 2 3 4 5; do
  before="$(attaches)"
  wait_until 300 bash -c "[[ \$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_gotls_instrumented_binaries\\{kind=\"idle\"\\}/ { print \$NF }') == 0 ]]" ||
    fail "round $round: the idle binaries' probes did not expire ($(idle) idle)"
  awaited_run "round $round"
  ((before < $(attaches))) || fail "round $round: the client's probes were not attached again"
  for i in $(seq 1 19); do client_run "$i"; done
done
echo "linger expired 5 times: 100 more client runs, $((SECONDS - start)) s in all"
expect_counts "500 runs"
echo "exits folded before the agent saw the process: $(sum_of '^sonde_agent_gotls_exited_unseen_processes_total')," \
  "discarded: $(sum_of '^sonde_agent_gotls_unattributed_processes_total')"
echo "PASS"
