#!/usr/bin/env bash
# A ClusterProfilingPolicy end to end, against the in-repo fake API server on loopback (which
# enforces the chart's RBAC and the CRDs' schemas): real /usr/bin/node processes in cgroups
# named like containerd containers, pods of the same name in three namespaces, two of them
# labelled sonde.dev/profile=true, and `sonde-agent --cluster` on the real kernel. Checks that
# a cluster policy selecting namespaces by that label instruments the pods of both labelled
# namespaces and not the third, that labelling and unlabelling the third attaches and
# detaches its pod, that the node report's entry for the policy (by uid) counts them and
# names the namespace of a selected pod that is not Node.js (SymbolsNotFound) and, when
# sonde-operator is in SONDE_BIN, that the policy's status (written through /status) counts
# them, says Degraded with that pod, and its Events are in "default". Nothing the binaries do is refused by the
# chart's RBAC. Needs root (cgroups, BPF) and helm.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
blocker="$here/workloads/blocker.js"
cluster_test_start sonde-e2e-cpolicy

cpolicies=/apis/sonde.dev/v1alpha1/clusterprofilingpolicies

# --- three namespaces, a Node.js pod named web-1 in each
kube POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null
declare -A ids
for ns in team-a team-b plain; do
  labels='{}'
  [[ $ns == team-* ]] && labels='{"sonde.dev/profile": "true"}'
  kube POST /api/v1/namespaces "{\"metadata\": {\"name\": \"$ns\", \"labels\": $labels}}" >/dev/null ||
    fail "cannot create namespace $ns"
  ids[$ns]="$(new_id)"
  run_in_container "$ns" "${ids[$ns]}" /usr/bin/node "$blocker" idle 0 0
  wait_until 150 grep -q ready "$tmp/$ns.out" || fail "node workload in $ns did not start"
  kube POST "/api/v1/namespaces/$ns/pods" "$(cat <<JSON
{"metadata": {"name": "web-1", "namespace": "$ns", "labels": {"app": "web"}},
 "spec": {"nodeName": "$node_name", "containers": [{"name": "app", "image": "app:1"}]},
 "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "containerID": "containerd://${ids[$ns]}"}]}}
JSON
)" >/dev/null || fail "cannot create pod $ns/web-1"
done
# A selected pod that is not Node.js: SymbolsNotFound, its example naming team-b.
sleeper_id="$(new_id)"
run_in_container sleeper "$sleeper_id" sleep 600
kube POST /api/v1/namespaces/team-b/pods "$(cat <<JSON
{"metadata": {"name": "sleeper", "namespace": "team-b", "labels": {"app": "web"}},
 "spec": {"nodeName": "$node_name", "containers": [{"name": "app", "image": "app:1"}]},
 "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "containerID": "containerd://$sleeper_id"}]}}
JSON
)" >/dev/null || fail "cannot create pod team-b/sleeper"

# --- the agent, and the operator when built
port="$(free_port)"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { cat "$tmp/agent.log"; fail "agent did not serve /metrics on $port"; }
with_operator=false
if [[ -x "$SONDE_BIN/sonde-operator" ]]; then
  with_operator=true
  "$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$report_ns" \
    --leader-elect=false --metrics-address "127.0.0.1:$(free_port)" >"$tmp/operator.log" 2>&1 &
  op_pid=$!
fi

procs() {  # procs NAMESPACE: the agent's Node.js process gauge for NAMESPACE/web-1/app
  agent_metric "$port" "sonde_agent_nodejs_processes{namespace=\"$1\",pod=\"web-1\",container=\"app\",node=\"$node_name\"}"
}
procs_is() { [[ "$(procs "$1")" == "$2" ]]; }

echo "--- a ClusterProfilingPolicy selecting namespaces labelled sonde.dev/profile=true"
policy='{"apiVersion": "sonde.dev/v1alpha1", "kind": "ClusterProfilingPolicy",
  "metadata": {"name": "profiled-web"},
  "spec": {"namespaceSelector": {"matchLabels": {"sonde.dev/profile": "true"}},
           "targets": [{"selector": {"matchLabels": {"app": "web"}}}],
           "instrumentations": {"nodejsEventLoop": {}}}}'
# The API server refuses one without a namespaceSelector (the CRD requires it).
no_selector="$(jq -c 'del(.spec.namespaceSelector) | .metadata.name = "no-selector"' <<<"$policy")"
if kube POST "$cpolicies" "$no_selector" >/dev/null 2>&1; then
  fail "a ClusterProfilingPolicy without namespaceSelector was accepted"
fi
uid="$(kube POST "$cpolicies" "$policy" | jq -r .metadata.uid)"
[[ -n "$uid" && "$uid" != null ]] || fail "cannot create the ClusterProfilingPolicy"
for ns in team-a team-b; do
  wait_until 150 procs_is "$ns" 1 ||
    { tail -20 "$tmp/agent.log"; fail "$ns/web-1 not instrumented: procs=$(procs "$ns")"; }
done
[[ -z "$(procs plain)" ]] || fail "plain/web-1 (namespace not labelled) was instrumented"
echo "instrumented: team-a/web-1=$(procs team-a) team-b/web-1=$(procs team-b); plain/web-1 has no series"
selection="$(curl -sf "http://127.0.0.1:$port/metrics" | grep '^sonde_policy_selection{' || true)"
expect_contains "$selection" 'namespace="team-b",pod="web-1",container="app",policy="clusterprofilingpolicy/profiled-web"' \
  "sonde_policy_selection"

entry() {
  kube GET "$report_path" |
    jq -c ".status.policies[] | select(.uid == \"$uid\") | [.observedGeneration, .matchedPods // 0, .instrumentedPods // 0, .nodejsProcesses // 0]"
}
entry_is() { [[ "$(entry)" == "$1" ]]; }
wait_until 250 entry_is '[1,3,2,2]' ||
  fail "report entry for the cluster policy: '$(entry || true)', want [1,3,2,2]"$'\n'"$(kube GET "$report_path" | jq -c .status)"
problems() {
  kube GET "$report_path" |
    jq -c ".status.policies[] | select(.uid == \"$uid\") | [.problems[]? | [.reason, .count, .namespace, .pod, .container]]"
}
problems_are() { [[ "$(problems)" == "$1" ]]; }
wait_until 250 problems_are '[["SymbolsNotFound",1,"team-b","sleeper","app"]]' ||
  fail "report problems for the cluster policy: '$(problems)'"
echo "report entry: $(entry), problems $(problems)"

status_of() { kube GET "$cpolicies/profiled-web" | jq -c "$1"; }
status_is() { [[ "$(status_of "$1")" == "$2" ]]; }
if $with_operator; then
  wait_until 250 status_is '[.status.matchedPods, .status.instrumentedPods, .status.nodejsProcesses, .status.nodesReporting]' '[3,2,2,1]' ||
    { tail -20 "$tmp/operator.log"; fail "cluster policy status: $(status_of .status)"; }
  wait_until 100 status_is '.status.conditions[] | select(.type == "Ready") | [.status, .reason]' '["True","AllNodesReporting"]' ||
    fail "cluster policy not Ready: $(status_of .status.conditions)"
  wait_until 100 status_is '.status.conditions[] | select(.type == "Degraded") | [.status, .reason]' '["True","SymbolsNotFound"]' ||
    fail "cluster policy not Degraded/SymbolsNotFound: $(status_of .status.conditions)"
  expect_contains "$(status_of '.status.conditions[] | select(.type == "Degraded") | .message')" \
    "team-b/sleeper/app on $node_name" "Degraded message"
  echo "status: $(status_of '.status | del(.conditions)')"
fi

echo "--- labelling the third namespace selects its pod; unlabelling releases it"
kube PATCH /api/v1/namespaces/plain '{"metadata": {"labels": {"sonde.dev/profile": "true"}}}' >/dev/null
wait_until 150 procs_is plain 1 || fail "plain/web-1 not instrumented once labelled: procs=$(procs plain)"
wait_until 250 entry_is '[1,4,3,3]' || fail "report entry after labelling: '$(entry)', want [1,4,3,3]"
if $with_operator; then
  wait_until 250 status_is '.status.matchedPods' '4' || fail "status after labelling: $(status_of .status)"
fi
kube PATCH /api/v1/namespaces/plain '{"metadata": {"labels": {"sonde.dev/profile": null}}}' >/dev/null
wait_until 150 procs_is plain 0 || fail "plain/web-1 still instrumented once unlabelled: procs=$(procs plain)"
wait_until 250 entry_is '[1,3,2,2]' || fail "report entry after unlabelling: '$(entry)', want [1,3,2,2]"
procs_is team-a 1 || fail "team-a/web-1 lost its instrumentation: procs=$(procs team-a)"
echo "plain/web-1: attached when labelled, detached when unlabelled"

if $with_operator; then
  events() {
    kube GET /api/v1/namespaces/default/events |
      jq -c '[.items[] | select(.involvedObject.kind == "ClusterProfilingPolicy" and .involvedObject.name == "profiled-web") | .reason] | sort'
  }
  has_ready_event() { [[ "$(events)" == *AllNodesReporting* ]]; }
  wait_until 100 has_ready_event || fail "no AllNodesReporting Event in default: $(events)"
  echo "Events in default: $(events)"
fi

echo "--- the policy deleted → every pod released, the entry gone"
kube DELETE "$cpolicies/profiled-web" >/dev/null
for ns in team-a team-b; do
  wait_until 150 procs_is "$ns" 0 || fail "$ns/web-1 still instrumented after deletion: procs=$(procs "$ns")"
done
gone() { [[ -z "$(entry)" ]]; }
wait_until 250 gone || fail "the deleted cluster policy is still in the report: $(entry)"

grep -q 'level=error' "$tmp/agent.log" && { cat "$tmp/agent.log"; fail "the agent logged errors"; }
refused="$(fake_requests_with 403 | jq -c '[.method, .path, .userAgent]')"
[[ -z "$refused" ]] || fail "requests the chart's RBAC refuses:"$'\n'"$refused"

echo "--- scoped to one namespace: no cluster-policy RBAC, and neither binary asks for them"
helm template sonde "$root/charts/sonde" -n "$report_ns" --set operator.watchNamespace=team-a \
  >"$tmp/scoped.yaml" || fail "helm template (scoped)"
grep -qE 'clusterprofilingpolicies|"namespaces"' "$tmp/scoped.yaml" &&
  fail "a scoped chart grants cluster-policy or namespace access"
stop_agent
[[ -n "$op_pid" ]] && { kill "$op_pid"; wait "$op_pid" 2>/dev/null || true; op_pid=""; }
kube POST "$cpolicies" "$policy" >/dev/null || fail "cannot re-create the cluster policy"
curl -sf -X DELETE "$API_URL/_fake/requests" >/dev/null
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --watch-namespace team-a --metrics-address "127.0.0.1:$port" >"$tmp/agent-scoped.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { cat "$tmp/agent-scoped.log"; fail "the scoped agent did not serve /metrics"; }
if $with_operator; then
  "$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$report_ns" \
    --namespace team-a --leader-elect=false --metrics-address "127.0.0.1:$(free_port)" \
    >"$tmp/operator-scoped.log" 2>&1 &
  op_pid=$!
fi
listed_pods() {
  curl -sf "$API_URL/_fake/requests" | jq -e '[.requests[] | select(.path == "/api/v1/namespaces/team-a/pods")] | length > 0'
}
wait_until 100 listed_pods || fail "the scoped agent did not list the pods of team-a (only)"
sleep 3  # long enough for every informer to have listed
asked="$(curl -sf "$API_URL/_fake/requests" |
  jq -c '.requests[] | select(.path | test("clusterprofilingpolicies|^/api/v1/namespaces(/[^/]+)?$|^/api/v1/pods")) | [.method, .path, .userAgent]')"
[[ -z "$asked" ]] || fail "scoped binaries asked for cluster policies, namespaces or every namespace's pods:"$'\n'"$asked"
[[ "$(procs team-a)" == "" || "$(procs team-a)" == 0 ]] ||
  fail "a scoped agent instrumented team-a/web-1 for a cluster policy: procs=$(procs team-a)"
[[ "$(kube GET "$cpolicies/profiled-web" | jq -c .status)" == null ]] ||
  fail "a scoped operator wrote a cluster policy's status"
echo "scoped: pods of team-a only, no request for clusterprofilingpolicies or namespaces; the cluster policy is left alone"
echo "PASS"
