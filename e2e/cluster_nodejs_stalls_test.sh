#!/usr/bin/env bash
# Node.js stalls in cluster mode, against the in-repo fake API server enforcing the chart's
# RBAC: a real /usr/bin/node in a cgroup named like a containerd container blocks its loop
# 200 ms every 400 ms in sondeStallCulprit(); a ProfilingPolicy with
# nodejsEventLoop.stallThresholdMs 100 selects its pod. The agent must post a Warning
# NodejsEventLoopStalled Event on the pod naming the culprit, and only one per pod per minute
# however many stalls follow (the rest counted rate_limited). Needs root (cgroups, BPF) and helm.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
cluster_test_start sonde-e2e-stalls

stall_id="$(new_id)"
run_in_container stall "$stall_id" /usr/bin/node "$here/workloads/stall.js" loop 0 200 400
wait_until 150 grep -q ready "$tmp/stall.out" || fail "node workload did not start"

kube POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null ||
  fail "cannot create the Node"
kube POST /api/v1/namespaces/shop/pods "$(cat <<JSON
{"metadata": {"name": "stall-1", "namespace": "shop", "labels": {"app": "stall"}},
 "spec": {"nodeName": "$node_name", "containers": [{"name": "app", "image": "app:1"}]},
 "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "containerID": "containerd://$stall_id"}]}}
JSON
)" >/dev/null || fail "cannot create the Pod"

port="$(free_port)"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { cat "$tmp/agent.log"; fail "agent did not serve /metrics on $port"; }

kube POST /apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies '{
  "apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
  "metadata": {"name": "stalls", "namespace": "shop"},
  "spec": {"targets": [{"selector": {"matchLabels": {"app": "stall"}}}],
           "instrumentations": {"nodejsEventLoop": {"stallThresholdMs": 100}}}}' >/dev/null ||
  fail "cannot create the policy"

stall_events() {  # the Event objects about pod shop/stall-1 with the stall reason
  kube GET /api/v1/namespaces/shop/events |
    jq -c '[.items[] | select(.involvedObject.kind == "Pod" and .involvedObject.name == "stall-1"
             and .reason == "NodejsEventLoopStalled")]'
}
has_event() { [[ "$(stall_events | jq length)" -ge 1 ]]; }
wait_until 200 has_event || { tail -20 "$tmp/agent.log"; fail "no Event on pod stall-1"; }
stalls() { agent_metric "$port" sonde_agent_nodejs_stalls_total; }
result() { agent_metric "$port" "sonde_agent_nodejs_stall_events_total{result=\"$1\"}"; }
# More stalls within the minute: each only rate limited.
four_more() { at_least "$(stalls)" 5 && at_least "$(result rate_limited)" 3; }
wait_until 100 four_more ||
  fail "stalls $(stalls), rate limited $(result rate_limited): want >= 5 and >= 3"

events="$(stall_events)"
echo "events: $events"
[[ "$(jq length <<<"$events")" == 1 ]] || fail "want one Event object, got $events"
[[ "$(jq -r '.[0].count' <<<"$events")" == 1 ]] || fail "the Event was repeated: $events"
[[ "$(jq -r '.[0].type' <<<"$events")" == Warning ]] || fail "not a Warning: $events"
pod_uid="$(kube GET /api/v1/namespaces/shop/pods/stall-1 | jq -r .metadata.uid)"
[[ "$(jq -r '.[0].involvedObject.uid' <<<"$events")" == "$pod_uid" ]] ||
  fail "the Event's involvedObject is not the pod ($pod_uid): $events"
msg="$(jq -r '.[0].message' <<<"$events")"
expect_contains "$msg" "sondeStallCulprit" "the Event's message"
expect_contains "$msg" "threshold 100 ms" "the Event's message"
[[ "$(result written)" == 1 && "$(result failed)" == 0 ]] ||
  fail "Event results: written $(result written), failed $(result failed)"
echo "cluster nodejs stalls: $(stalls) stalls, 1 Event, $(result rate_limited) rate limited: ok"
