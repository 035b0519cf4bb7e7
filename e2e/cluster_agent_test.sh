#!/usr/bin/env bash
# The agent in-cluster end to end, against the in-repo fake API server on loopback: real
# /usr/bin/node and sleep processes run in cgroups named like containerd containers, a Node and
# Pods whose containerStatuses carry those container ids, and `sonde-agent --cluster` on the
# real kernel. Checks that creating, changing and deleting a ProfilingPolicy attaches and
# detaches the agent (its /metrics, per namespace/pod/container), that its ProfilingNodeReport
# counts say so (keyed by the policy's uid: a re-created policy is a new entry) and carries
# SymbolsNotFound for a selected process that is not Node.js, that its node Lease is renewed
# without rewriting the report, that a policy's cpu samples its pod at its frequency (and pushes
# its profiles to a Pyroscope stand-in) and no other pod, and,
# when sonde-operator is in SONDE_BIN, that the policy status shows the counts and
# Degraded/SymbolsNotFound. The fake API server enforces the chart's RBAC: agent and operator
# run with their service accounts' tokens. Needs root (cgroups, BPF) and helm.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
blocker="$here/workloads/blocker.js"
# Profiles are read with a token issued for the agent's audience (sonde, the default).
FAKE_API_IDENTITIES=("profiler-token=admin;aud=sonde")
cluster_test_start sonde-e2e

policies=/apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies

# --- "containers": processes exec'd inside cgroups named like containerd containers (lib.sh)
web_id="$(new_id)" sleeper_id="$(new_id)" other_id="$(new_id)"
run_in_container web "$web_id" /usr/bin/node "$blocker" periodic 0 100  # 10% blocked
wait_until 150 grep -q ready "$tmp/web.out" || fail "node workload did not start"
run_in_container sleeper "$sleeper_id" sleep 600
run_in_container other "$other_id" /usr/bin/node "$blocker" idle 0 0  # a pod of another node
wait_until 150 grep -q ready "$tmp/other.out" || fail "node workload did not start"

# --- the Node and its Pods
kube POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null ||
  fail "cannot create the Node"
pod_json() {  # pod_json NAME NODE ID LABELS_JSON
  cat <<JSON
{"metadata": {"name": "$1", "namespace": "shop", "labels": $4},
 "spec": {"nodeName": "$2", "containers": [{"name": "app", "image": "app:1"}]},
 "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "containerID": "containerd://$3"}]}}
JSON
}
kube POST /api/v1/namespaces/shop/pods \
  "$(pod_json web-1 "$node_name" "$web_id" '{"app": "web", "instance": "web-1"}')" >/dev/null
kube POST /api/v1/namespaces/shop/pods \
  "$(pod_json sleeper "$node_name" "$sleeper_id" '{"app": "web", "instance": "sleeper"}')" >/dev/null
kube POST /api/v1/namespaces/shop/pods \
  "$(pod_json other-1 other-node "$other_id" '{"app": "web", "instance": "other-1"}')" >/dev/null

# --- a Pyroscope ingest stand-in the agent pushes sampled containers' profiles to
mkdir -p "$tmp/pushes"
python3 "$root/e2e/workloads/pyroscope_receiver.py" "$tmp/pushes" "" \
  >"$tmp/receiver.out" 2>"$tmp/receiver.err" &
pids+=($!)
wait_until 100 grep -q listening "$tmp/receiver.out" || fail "the Pyroscope stand-in did not start"
receiver_port="$(awk '/listening/ { print $2 }' "$tmp/receiver.out")"

# --- the agent
port="$(free_port)"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" --pyroscope-url "http://127.0.0.1:$receiver_port" \
  --pyroscope-interval 5 >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { cat "$tmp/agent.log"; fail "agent did not serve /metrics on $port"; }

procs() {  # procs POD: the agent's Node.js process gauge for shop/POD/app
  agent_metric "$port" "sonde_agent_nodejs_processes{namespace=\"shop\",pod=\"$1\",container=\"app\",node=\"$node_name\"}"
}
procs_is() { [[ "$(procs "$1")" == "$2" ]]; }
# Node.js processes instrumented on the node, all containers (a released container's gauge
# reads 0 until its series leave after the grace period).
instrumented() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk '/^sonde_agent_nodejs_processes\{/ { s += $2 } END { print s + 0 }'
}
instrumented_is() { [[ "$(instrumented)" == "$1" ]]; }
web_uid=""  # the uid of policy shop/web, set when it is created
entry() {  # entry JQ: of the report's entry for policy shop/web (zero counts are left out)
  kube GET "$report_path" |
    jq -c ".status.policies[] | select(.uid == \"$web_uid\") | $1"
}
entry_is() { [[ "$(entry "$1")" == "$2" ]]; }
expect_entry() {  # expect_entry WHAT JQ WANT
  wait_until 250 entry_is "$2" "$3" ||
    fail "$1: report $2 is '$(entry "$2" || true)', want '$3'"$'\n'"$(kube GET "$report_path" | jq .status)"
}
wait_until 100 kube GET "$report_path" || { cat "$tmp/agent.log"; fail "no node report"; }
[[ "$(kube GET "$report_path" | jq -r '.metadata.ownerReferences[0].kind')" == Node ]] ||
  fail "the report has no ownerReference to its Node"
lease_path=/apis/coordination.k8s.io/v1/namespaces/$report_ns/leases/sonde-node-$node_name
renewed() { kube GET "$lease_path" | jq -r .spec.renewTime; }
first_renewal="$(renewed)"
[[ "$first_renewal" == 20* ]] || fail "no node Lease: $(kube GET "$lease_path" || true)"
report_rv="$(kube GET "$report_path" | jq -r .metadata.resourceVersion)"
renewed_since() { [[ "$(renewed)" != "$first_renewal" ]]; }
wait_until 250 renewed_since || fail "the node Lease is not renewed: $(kube GET "$lease_path")"
[[ "$(kube GET "$report_path" | jq -r .metadata.resourceVersion)" == "$report_rv" ]] ||
  fail "the report was rewritten though nothing it says changed"
echo "node Lease renewed at $(renewed); the report unchanged"
[[ "$(instrumented)" == 0 ]] || fail "processes instrumented before any policy: $(instrumented)"
[[ -z "$(procs web-1)" ]] || fail "web-1 instrumented before any policy"

echo "--- a policy selecting the pods → attached"
policy='{"apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
  "metadata": {"name": "web", "namespace": "shop"},
  "spec": {"targets": [{"selector": {"matchLabels": {"app": "web"}}}],
           "instrumentations": {"nodejsEventLoop": {}}}}'
web_uid="$(kube POST "$policies" "$policy" | jq -r .metadata.uid)"
wait_until 100 procs_is web-1 1 ||
  { tail -20 "$tmp/agent.log"; fail "web-1 not instrumented: procs=$(procs web-1)"; }
echo "metrics: web-1 processes=$(procs web-1), Node.js processes instrumented=$(instrumented)"
[[ -z "$(procs other-1)" ]] || fail "a pod of another node was instrumented"
[[ -z "$(procs sleeper)" ]] || fail "sleep counted as a Node.js process"
blocked="$(agent_metric "$port" "container_nodejs_event_loop_blocked_time_seconds_total{namespace=\"shop\",pod=\"web-1\",container=\"app\",node=\"$node_name\"}")"
[[ -n "$blocked" ]] || fail "no event-loop series for shop/web-1/app"
expect_entry "selected" '[.matchedPods, .instrumentedPods, .nodejsProcesses]' '[2,1,1]'
expect_entry "selected" '[.problems[] | [.reason, .count, .pod, .container]]' '[["SymbolsNotFound",1,"sleeper","app"]]'
echo "report: $(entry .)"

if [[ -x "$SONDE_BIN/sonde-operator" ]]; then
  echo "--- the operator turns the report into policy status"
  "$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$report_ns" \
    --leader-elect=false --metrics-address "127.0.0.1:$(free_port)" >"$tmp/operator.log" 2>&1 &
  op_pid=$!
  status_is() { [[ "$(kube GET "$policies/web" | jq -c "$1")" == "$2" ]]; }
  wait_until 200 status_is '[.status.matchedPods, .status.instrumentedPods, .status.nodejsProcesses]' '[2,1,1]' ||
    { tail -20 "$tmp/operator.log"; fail "policy status counts: $(kube GET "$policies/web" | jq -c .status)"; }
  wait_until 100 status_is '.status.conditions[] | select(.type == "Degraded") | [.status, .reason]' '["True","SymbolsNotFound"]' ||
    fail "policy not Degraded/SymbolsNotFound: $(kube GET "$policies/web" | jq -c .status.conditions)"
  echo "policy status: $(kube GET "$policies/web" | jq -c '.status | del(.conditions[].lastTransitionTime)')"
else
  echo "(no sonde-operator in $SONDE_BIN: policy status not checked)"
fi

echo "--- the policy excludes web-1 → detached"
kube PATCH "$policies/web" '{"spec": {"excludes": [{"selector": {"matchLabels": {"instance": "web-1"}}}]}}' >/dev/null
wait_until 100 instrumented_is 0 ||
  fail "still instrumented after the exclude: $(instrumented)"
[[ "$(procs web-1)" == 0 ]] || fail "web-1 processes=$(procs web-1) after the exclude, want 0"
expect_entry "excluded" '[.observedGeneration, .matchedPods, .instrumentedPods // 0, .nodejsProcesses // 0]' '[2,1,0,0]'

echo "--- the exclude removed → attached again"
kube PATCH "$policies/web" '{"spec": {"excludes": null}}' >/dev/null
wait_until 100 procs_is web-1 1 || fail "web-1 not instrumented again: procs=$(procs web-1)"
expect_entry "re-selected" '[.matchedPods, .instrumentedPods, .nodejsProcesses]' '[2,1,1]'

echo "--- the policy deleted → detached"
kube DELETE "$policies/web" >/dev/null
wait_until 100 instrumented_is 0 ||
  fail "still instrumented after the policy was deleted: $(instrumented)"
[[ "$(procs web-1)" == 0 ]] || fail "web-1 processes=$(procs web-1) after deletion, want 0"
policies_in_report_is() { [[ "$(kube GET "$report_path" | jq '.status.policies | length')" == "$1" ]]; }
wait_until 150 policies_in_report_is 0 ||
  fail "the deleted policy is still in the report: $(kube GET "$report_path" | jq -c .status.policies)"

echo "--- a policy with cpu → its pod's CPU samples are served, another pod's are not"
busy_id="$(new_id)" spare_id="$(new_id)"
# busy-1 forks a worker that never execs: the agent never considers it, yet it is the
# container's work (sampled through the container's cgroup).
run_in_container busy "$busy_id" bash -c 'while :; do :; done & while :; do :; done'
busy_pid=$LAST_PID
wait_until 50 pgrep -P "$busy_pid" >/dev/null || fail "busy-1 did not fork its worker"
worker_pid="$(pgrep -P "$busy_pid")"
run_in_container spare "$spare_id" bash -c 'while :; do :; done'
spare_pid=$LAST_PID
kube POST /api/v1/namespaces/shop/pods \
  "$(pod_json busy-1 "$node_name" "$busy_id" '{"app": "busy"}')" >/dev/null
kube POST /api/v1/namespaces/shop/pods \
  "$(pod_json spare-1 "$node_name" "$spare_id" '{"app": "spare"}')" >/dev/null
cpu_uid="$(kube POST "$policies" '{"apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
  "metadata": {"name": "cpu", "namespace": "shop"},
  "spec": {"targets": [{"selector": {"matchLabels": {"app": "busy"}}}],
           "instrumentations": {"cpu": {"frequencyHz": 49}}}}' | jq -r .metadata.uid)"
cpu_entry() { kube GET "$report_path" | jq -c ".status.policies[] | select(.uid == \"$cpu_uid\") | [.matchedPods // 0, .instrumentedPods // 0, (.problems // [] | length)]"; }
cpu_entry_is() { [[ "$(cpu_entry)" == "$1" ]]; }
wait_until 150 cpu_entry_is '[1,1,0]' ||
  { tail -20 "$tmp/agent.log"; fail "cpu policy report: $(cpu_entry), want [1,1,0]"; }
wait_until 100 grep -q 'CPU sampling frequency changed.*frequency_hz=49' "$tmp/agent.log" ||
  fail "the node does not sample at the policy's 49 Hz: $(grep -i 'cpu' "$tmp/agent.log" | tail -3)"
folded_samples() {  # folded_samples POD: samples of shop/POD in a 3 s profile
  curl -sf -H "Authorization: Bearer profiler-token" \
    "http://127.0.0.1:$port/debug/pprof/profile?seconds=3&format=folded&namespace=shop&pod=$1" |
    awk '{ n += $NF } END { print n + 0 }'
}
cpu_ticks() {  # cpu_ticks PID...: utime + stime, summed
  local n=0 p
  for p; do n=$((n + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
  echo "$n"
}
ticks0="$(cpu_ticks "$busy_pid" "$worker_pid")"
busy_samples="$(folded_samples busy-1)"
busy_cpu="$(awk -v a="$ticks0" -v b="$(cpu_ticks "$busy_pid" "$worker_pid")" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')"
worker_samples="$(curl -sf -H "Authorization: Bearer profiler-token" \
  "http://127.0.0.1:$port/debug/pprof/profile?seconds=2&format=folded&pid=$worker_pid" |
  awk '{ n += $NF } END { print n + 0 }')"
spare_samples="$(folded_samples spare-1)"
echo "3 s profiles at 49 Hz: busy-1 $busy_samples samples for $busy_cpu s of CPU (its forked worker alone, 2 s: $worker_samples), spare-1 (not selected) $spare_samples"
at_least "$worker_samples" 5 || fail "busy-1's forked worker (pid $worker_pid) is not sampled: $worker_samples samples"
# Each sample stands for 1/49 s of the CPU time the kernel says busy-1 used (a shared machine).
at_least "$busy_samples" 10 || fail "busy-1's profile has $busy_samples samples, want at least 10"
within "$busy_samples" "$(awk -v c="$busy_cpu" 'BEGIN { print c * 49 }')" "$(awk -v c="$busy_cpu" 'BEGIN { print c * 49 * 0.4 + 5 }')" ||
  fail "busy-1: $busy_samples samples for $busy_cpu s of CPU, want about $busy_cpu x 49"
[[ "$spare_samples" == 0 ]] || fail "spare-1 is not selected but its profile has $spare_samples samples"
[[ -n "$(agent_metric "$port" "container_cpu_profile_samples_total{namespace=\"shop\",pod=\"busy-1\",container=\"app\",node=\"$node_name\"}")" ]] ||
  fail "no container_cpu_profile_samples_total series for busy-1"
# Read whole first: with pipefail, `grep -q` stopping at a match breaks curl's pipe, and the
# pipeline would fail exactly when spare-1 has series.
exposition="$(curl -sf "http://127.0.0.1:$port/metrics")" || fail "no /metrics"
grep -q 'container_cpu_profile_samples_total{[^}]*pod="spare-1"' <<<"$exposition" &&
  fail "spare-1 has CPU sample series"
# --pyroscope-url: busy-1's profiles are pushed with its labels, spare-1's never.
wait_until 300 bash -c "grep -l 'pod=busy-1' '$tmp/pushes/'*.json" ||
  fail "no push for busy-1 reached the Pyroscope stand-in: $(cat "$tmp/receiver.err")"
push="$(grep -l 'pod=busy-1' "$tmp/pushes/"*.json | head -1)"
expect_contains "$(jq -r .name "$push")" "sonde.cpu{namespace=shop,pod=busy-1,container=app,node=$node_name}" "pushed name"
[[ "$(jq -r .sampleRate "$push")" == 49 ]] || fail "pushed sampleRate $(jq -r .sampleRate "$push"), want 49"
grep -l 'pod=spare-1' "$tmp/pushes/"*.json >/dev/null 2>&1 && fail "spare-1's profile was pushed"
echo "pushed: $(jq -r .name "$push")"
kube DELETE "$policies/cpu" >/dev/null
kill "$busy_pid" "$spare_pid"

echo "--- the policy re-created under its name → a new entry, generation 1"
old_uid="$web_uid"
web_uid="$(kube POST "$policies" "$policy" | jq -r .metadata.uid)"
[[ "$web_uid" != "$old_uid" ]] || fail "the re-created policy kept its uid"
wait_until 100 procs_is web-1 1 || fail "web-1 not instrumented by the re-created policy"
expect_entry "re-created" '[.observedGeneration, .matchedPods, .instrumentedPods, .nodejsProcesses]' '[1,2,1,1]'
[[ "$(kube GET "$report_path" | jq "[.status.policies[] | select(.uid == \"$old_uid\")] | length")" == 0 ]] ||
  fail "the deleted policy's entry is still in the report"

echo "--- API server unreachable: the last known policies apply, SIGTERM still stops the agent"
kill -STOP "$api_pid"
run_in_container web-2nd "$web_id" /usr/bin/node "$blocker" idle 0 0  # a 2nd process in web-1
wait_until 150 procs_is web-1 2 ||
  fail "with the API server stopped, a new process of web-1 was not instrumented: procs=$(procs web-1)"
echo "web-1 processes=$(procs web-1) while the API server is stopped"
sleep 2  # the report writer is now blocked on the unanswered API server
start=$(date +%s.%N)
kill -TERM "$AGENT_PID"
rc=0
wait "$AGENT_PID" || rc=$?
AGENT_PID=
took="$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')"
kill -CONT "$api_pid"
echo "agent exited $rc after SIGTERM in $took s"
[[ $rc == 0 ]] || fail "agent exit status $rc after SIGTERM"
# Bound: the stop cancels every API call in flight (agent_health_test.sh has a list in flight
# too); without that a report write waits out its timeout, a list its 30 s times the retries.
awk -v t="$took" 'BEGIN { exit !(t < 15) }' || fail "agent took $took s to stop during the outage"
grep -q 'level=error' "$tmp/agent.log" && { cat "$tmp/agent.log"; fail "the agent logged errors"; }
# Everything the agent and the operator did was within the chart's RBAC.
refused="$(fake_requests_with 403 | jq -c '[.method, .path, .userAgent]')"
[[ -z "$refused" ]] || fail "requests the chart's RBAC refuses:"$'\n'"$refused"
echo "PASS"
