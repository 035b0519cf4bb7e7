#!/usr/bin/env bash
# The agent's /healthz (liveness) and /readyz (readiness), and its exit on SIGTERM, against the
# in-repo fake API server made to hang: requests read and never answered, watches silent.
#  - cluster mode, everything answered: both 200, each check listed ([+]name ok), on the
#    probes' own listener (--health-address, as the chart deploys it) and on the metrics port;
#  - every API request hung: /readyz 503 naming the node Lease once it goes unrenewed past its
#    40 s, while /healthz stays 200 (a restart cannot make the API server answer); back to 200
#    once the server answers again;
#  - lists hung and the watches expired (the informers relist into the hang), the writer's
#    calls hung too: SIGTERM ends the agent within 10 s, below a single list attempt's 30 s
#    timeout (let alone its 5 attempts): the stop cancels what is in flight;
#  - started while lists hang: /readyz 503 naming the informers, /healthz 200, ready once the
#    lists are answered; SIGTERM during those first lists ends it within 10 s as well;
#  - standalone: the same endpoints, without the cluster checks.
# Needs root (BPF) and helm.
# e2e-lane: beside (scripts/run-e2e.sh: no workload, no cgroup, nothing timed on the host)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
tmp="$SONDE_E2E_TMP"
node_name="health-node"
report_ns="sonde-system"

[[ $EUID -eq 0 ]] || fail "needs root (BPF)"
command -v helm >/dev/null || fail "helm not found (make deps)"
api_pid=""
cleanup() {
  [[ -n "${AGENT_PID:-}" ]] && { kill -KILL "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true; }
  [[ -n "$api_pid" ]] && { kill "$api_pid" 2>/dev/null || true; wait "$api_pid" 2>/dev/null || true; }
}
trap cleanup EXIT

helm template sonde "$root/charts/sonde" -n "$report_ns" >"$tmp/chart.yaml" || fail "helm template"
start_fake_apiserver "$tmp/chart.yaml" "$report_ns"
api_pid=$API_PID
kube_admin POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null ||
  fail "cannot create the Node"
fault() { curl -sf -X POST "$API_URL/_fake/faults" --data "$1" >/dev/null || fail "fault $1"; }
watch_control() { curl -sf -X POST "$API_URL/_fake/watch_control" --data "{\"action\": \"$1\"}" >/dev/null; }

probe() {  # probe PORT PATH: prints the status code, then the body
  local out code
  out="$(curl -s --max-time 5 -w '\n%{http_code}' "http://127.0.0.1:$1$2")" || true
  code="${out##*$'\n'}"
  printf '%s\n%s\n' "$code" "${out%$'\n'*}"
}
status_is() { [[ "$(probe "$1" "$2" | head -1)" == "$3" ]]; }
body() { probe "$1" "$2" | tail -n +2; }

# start_cluster_agent PORT LOG [HEALTH_PORT]: with HEALTH_PORT, the probes' own listener too
# (--health-address, where the chart's probes point).
start_cluster_agent() {
  "$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
    --metrics-address "127.0.0.1:$1" ${3:+--health-address "127.0.0.1:$3"} >"$2" 2>&1 &
  AGENT_PID=$!
}
sigterm() {  # sigterm: SIGTERM the agent and wait for it; sets rc and took (seconds)
  local start
  start=$(date +%s.%N)
  rc=0
  kill -TERM "$AGENT_PID"
  wait "$AGENT_PID" || rc=$?
  AGENT_PID=
  took="$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')"
}

echo "--- cluster mode, API server answering: alive and ready"
# Probed on their own listener, as the chart's kubelet probes are; the metrics port answers the
# same.
metrics_port="$(free_port)"
port="$(free_port)"
start_cluster_agent "$metrics_port" "$tmp/agent.log" "$port"
wait_until 600 status_is "$port" /readyz 200 ||
  { cat "$tmp/agent.log"; probe "$port" /readyz; fail "the agent never became ready"; }
status_is "$metrics_port" /readyz 200 || fail "/readyz on the metrics port: $(body "$metrics_port" /readyz)"
ready="$(body "$port" /readyz)"
for check in event-thread inspection runtime informers node-report-writer node-lease; do
  expect_contains "$ready" "[+]$check ok" "/readyz"
done
live="$(body "$port" /healthz)"
status_is "$port" /healthz 200 || fail "/healthz: $live"
expect_contains "$live" "[+]node-report-writer ok" "/healthz"
[[ "$live" != *node-lease* && "$live" != *informers* ]] ||
  fail "/healthz carries readiness checks:"$'\n'"$live"
echo "$ready" | sed 's/^/  readyz: /'
check_metrics_documented "$metrics_port"

echo "--- every request hung, watches silent: not ready once the Lease lapses, still alive"
fault '{"path": ".", "hang": 600, "times": 1000000}'
watch_control silence
hung_at=$(date +%s)
wait_until 900 status_is "$port" /readyz 503 ||
  fail "/readyz still $(probe "$port" /readyz | head -1) $(( $(date +%s) - hung_at )) s into the outage"
not_ready="$(body "$port" /readyz)"
echo "not ready after $(( $(date +%s) - hung_at )) s:"
echo "$not_ready" | sed 's/^/  readyz: /'
expect_contains "$not_ready" "[-]node-lease: Lease not renewed for" "/readyz during the outage"
expect_contains "$not_ready" "[+]informers ok" "/readyz during the outage (the caches stay)"
status_is "$port" /healthz 200 ||
  fail "/healthz failed during an API outage (a restart would not help):"$'\n'"$(body "$port" /healthz)"
sleep 5  # the writer keeps turning through the hang: its calls time out, it is not stuck
status_is "$port" /healthz 200 || fail "/healthz: $(body "$port" /healthz)"

echo "--- the server answers again: ready"
fault '{"clear": true}'
cleared_at=$(date +%s)
# The Lease's retry backoff is at most 30 s.
wait_until 500 status_is "$port" /readyz 200 ||
  fail "not ready $(( $(date +%s) - cleared_at )) s after the outage: $(body "$port" /readyz)"
echo "ready again $(( $(date +%s) - cleared_at )) s after the outage ended"

echo "--- lists and writes hung, informers relisting: SIGTERM ends the agent promptly"
watches_open() { [[ "$(curl -sf "$API_URL/_fake/watches" | jq .watches)" -ge 2 ]]; }
wait_until 600 watches_open || fail "the informers' watches are not open again"
curl -sf -X DELETE "$API_URL/_fake/requests" >/dev/null
fault '{"path": ".", "hang": 600, "times": 1000000}'
watch_control expire  # an ERROR 410 on every watch: the informers list again, into the hang
# Either informer's list will do: one whose watch was being re-opened (idle restart) when the
# hang began waits in that watch request instead, and only the other one relists.
hung_list() {
  curl -sf "$API_URL/_fake/requests" |
    jq -e '[.requests[] | select(.status == 0 and .method == "GET" and (.query.watch // "") == ""
                                and (.path | test("/(pods|profilingpolicies)$")))] | length > 0'
}
wait_until 300 hung_list || fail "the informers did not relist: $(curl -sf "$API_URL/_fake/requests")"
sleep 1
sigterm
echo "agent exited $rc after SIGTERM in $took s, a list and the writer's calls in flight"
[[ $rc == 0 ]] || { tail -20 "$tmp/agent.log"; fail "agent exit status $rc after SIGTERM"; }
awk -v t="$took" 'BEGIN { exit !(t < 10) }' ||
  fail "the agent took $took s to stop with a list in flight (one attempt may take 30 s)"
grep -q 'level=error' "$tmp/agent.log" && { cat "$tmp/agent.log"; fail "the agent logged errors"; }

echo "--- started while lists hang: not ready, naming the informers; ready once listed"
fault '{"clear": true}'
fault '{"method": "GET", "watch": false, "path": "/(pods|profilingpolicies)$", "hang": 600, "times": 1000000}'
port="$(free_port)"
start_cluster_agent "$port" "$tmp/agent-2.log"
# The agent waits up to 30 s for its first lists before it serves.
wait_until 600 status_is "$port" /readyz 503 ||
  { cat "$tmp/agent-2.log"; fail "/readyz: $(probe "$port" /readyz)"; }
unsynced="$(body "$port" /readyz)"
echo "$unsynced" | sed 's/^/  readyz: /'
expect_contains "$unsynced" "[-]informers: policies and pods not listed yet" "/readyz before the lists"
status_is "$port" /healthz 200 || fail "/healthz before the lists: $(body "$port" /healthz)"
fault '{"clear": true}'
# The reflector's list backoff is at most 30 s.
wait_until 500 status_is "$port" /readyz 200 || fail "not ready after the lists: $(body "$port" /readyz)"
sigterm
[[ $rc == 0 ]] || { tail -20 "$tmp/agent-2.log"; fail "agent exit status $rc after SIGTERM"; }

echo "--- SIGTERM while waiting for the first lists, which hang: a prompt exit too"
fault '{"method": "GET", "watch": false, "path": "/(pods|profilingpolicies)$", "hang": 600, "times": 1000000}'
curl -sf -X DELETE "$API_URL/_fake/requests" >/dev/null
start_cluster_agent "$(free_port)" "$tmp/agent-3.log"
wait_until 300 hung_list || { cat "$tmp/agent-3.log"; fail "the agent did not list"; }
sigterm
echo "agent exited $rc after SIGTERM in $took s, during its first lists"
[[ $rc == 0 ]] || { cat "$tmp/agent-3.log"; fail "agent exit status $rc after SIGTERM"; }
awk -v t="$took" 'BEGIN { exit !(t < 10) }' ||
  fail "the agent took $took s to stop during its first lists"
fault '{"clear": true}'

echo "--- standalone: the same endpoints, without the cluster checks"
port="$(free_port)"
start_agent "$port"
wait_until 300 status_is "$port" /readyz 200 || fail "standalone /readyz: $(probe "$port" /readyz)"
ready="$(body "$port" /readyz)"
expect_contains "$ready" "[+]event-thread ok" "standalone /readyz"
expect_contains "$ready" "[+]runtime ok" "standalone /readyz"
[[ "$ready" != *node-lease* ]] || fail "standalone /readyz has cluster checks: $ready"
status_is "$port" /healthz 200 || fail "standalone /healthz: $(body "$port" /healthz)"
stop_agent
echo "PASS"
