#!/usr/bin/env bash
# A verb missing from the chart's RBAC is caught before a real cluster: the fake API server
# enforces the rendered Roles per service-account token. With `create` taken from the agent's
# node-report Role and `update` from the operator's profilingpolicies/status and
# clusterprofilingpolicies/status rules, the agent cannot write its ProfilingNodeReport and the
# operator cannot write the status of either policy kind; both get
# the real server's 403 and say so in their logs, and the e2e checks that rely on those writes
# (cluster_agent_test.sh) would fail. With rbac.agentOwnNodeOnly=true, the chart's
# ValidatingAdmissionPolicy (enforced by the fake through its Python twins) lets an agent whose
# token is bound to its node write that node's report and Lease, and refuses another node's, the
# operator's leader Lease, and any write by a token bound to no node. Needs root (the agent
# loads BPF) and helm.
# e2e-lane: beside (scripts/run-e2e.sh: no workload, no cgroup, nothing timed on the host)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
tmp="$SONDE_E2E_TMP"
ns="sonde-system"
node_name="rbac-node"

[[ $EUID -eq 0 ]] || fail "needs root (the agent loads BPF)"
command -v helm >/dev/null || fail "helm not found (make deps)"

API_PID="" op_pid=""
cleanup() {
  stop_agent
  [[ -n "$op_pid" ]] && { kill "$op_pid" 2>/dev/null || true; wait "$op_pid" 2>/dev/null || true; }
  [[ -n "$API_PID" ]] && { kill "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true; }
}
trap cleanup EXIT

helm template sonde "$root/charts/sonde" -n "$ns" >"$tmp/chart.yaml" || fail "helm template"
python3 - "$tmp/chart.yaml" "$tmp/broken.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
removed = []
for d in docs:
    for rule in d.get("rules") or []:
        if d["kind"] == "Role" and d["metadata"]["name"] == "sonde-agent" and \
                "profilingnodereports" in rule["resources"] and "create" in rule["verbs"]:
            rule["verbs"].remove("create")
            removed.append("agent: create profilingnodereports")
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "sonde-operator" and \
                "profilingpolicies/status" in rule["resources"] and "update" in rule["verbs"]:
            rule["verbs"].remove("update")
            removed.append("operator: update profilingpolicies/status")
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "sonde-operator" and \
                "clusterprofilingpolicies/status" in rule["resources"] and "update" in rule["verbs"]:
            rule["verbs"].remove("update")
            removed.append("operator: update clusterprofilingpolicies/status")
assert len(removed) == 3, "the chart's rules changed shape: %s" % removed
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
print("removed from the chart's RBAC:", "; ".join(removed))
PY

# The Node and a ProfilingPolicy in shop, created as admin on the fake just started.
create_node_and_policy() {
  kube_admin POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null ||
    fail "cannot create the Node"
  kube_admin POST /apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies '{
    "apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"targets": [{"selector": {"matchLabels": {"app": "web"}}}],
             "instrumentations": {"nodejsEventLoop": {}}}}' >/dev/null || fail "cannot create the policy"
}

start_fake_apiserver "$tmp/broken.yaml" "$ns"
create_node_and_policy
kube_admin POST /apis/sonde.dev/v1alpha1/clusterprofilingpolicies '{
  "apiVersion": "sonde.dev/v1alpha1", "kind": "ClusterProfilingPolicy",
  "metadata": {"name": "all-web"},
  "spec": {"namespaceSelector": {}, "targets": [{"selector": {"matchLabels": {"app": "web"}}}],
           "instrumentations": {"nodejsEventLoop": {}}}}' >/dev/null || fail "cannot create the cluster policy"

echo "--- the agent without 'create' on its node report"
port="$(free_port)"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
forbidden_create() {
  fake_requests_with 403 | jq -e 'select(.method == "POST" and (.path | endswith("/profilingnodereports")))'
}
wait_until 300 forbidden_create ||
  { tail -20 "$tmp/agent.log"; fail "the agent's report create was not refused with 403"; }
wait_until 100 grep -q 'cannot create resource \\"profilingnodereports\\"' "$tmp/agent.log" ||
  { tail -20 "$tmp/agent.log"; fail "the agent does not report the 403"; }
echo "agent: $(grep -o 'profilingnodereports.sonde.dev is forbidden[^"]*"[^"]*"[^,]*' "$tmp/agent.log" | head -1)"
kube_admin GET "/apis/sonde.dev/v1alpha1/namespaces/$ns/profilingnodereports/$node_name" >/dev/null &&
  fail "a report exists although the agent may not create it"
# Everything the agent may do still works: it read the policies and its node's pods.
listed_policies() {
  fake_requests_with 200 | jq -s -e 'map(select(.path | endswith("/profilingpolicies"))) | length > 0'
}
listed_policies >/dev/null ||
  fail "the agent did not list policies with its service account: $(curl -sf "$API_URL/_fake/requests" | jq -c '.requests[] | [.method, .path, .status]')"

echo "--- the operator without 'update' on policy status"
"$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$ns" \
  --leader-elect=false --metrics-address "127.0.0.1:$(free_port)" >"$tmp/operator.log" 2>&1 &
op_pid=$!
wait_until 300 grep -q 'cannot update resource \\"profilingpolicies/status\\"' "$tmp/operator.log" ||
  { tail -20 "$tmp/operator.log"; fail "the operator does not report the 403 on status"; }
echo "operator: $(grep -o 'profilingpolicies.sonde.dev \\"web\\" is forbidden[^,]*' "$tmp/operator.log" | head -1)"
[[ "$(kube_admin GET /apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies/web | jq -c .status)" == null ]] ||
  fail "the policy has a status although the operator may not write it"
wait_until 300 grep -q 'cannot update resource \\"clusterprofilingpolicies/status\\"' "$tmp/operator.log" ||
  { tail -20 "$tmp/operator.log"; fail "the operator does not report the 403 on cluster policy status"; }
[[ "$(kube_admin GET /apis/sonde.dev/v1alpha1/clusterprofilingpolicies/all-web | jq -c .status)" == null ]] ||
  fail "the cluster policy has a status although the operator may not write it"
echo "operator: $(grep -o 'clusterprofilingpolicies.sonde.dev \\"all-web\\" is forbidden[^,]*' "$tmp/operator.log" | head -1)"
echo "missing RBAC verbs fail with 403 and are reported"

echo "--- scoped (operator.watchNamespace=shop): Roles in shop suffice, nothing is refused"
stop_agent
kill "$op_pid" 2>/dev/null || true; wait "$op_pid" 2>/dev/null || true; op_pid=""
kill "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true; API_PID=""
helm template sonde "$root/charts/sonde" -n "$ns" --set operator.watchNamespace=shop \
  >"$tmp/scoped.yaml" || fail "helm template (scoped)"
python3 - "$tmp/scoped.yaml" <<'PY' || fail "the scoped chart grants pods, events or policies cluster-wide"
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ClusterRole" and not any(
            k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in d["metadata"]["labels"]):
        for rule in d["rules"]:
            assert not {"pods", "events", "profilingpolicies"} & set(rule["resources"]), (d["metadata"]["name"], rule)
PY
rm -f "$tmp/apiserver.out"  # or the new server's PORT line could be read from the old one's
start_fake_apiserver "$tmp/scoped.yaml" "$ns"
create_node_and_policy
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --watch-namespace shop --metrics-address "127.0.0.1:$port" >"$tmp/agent-scoped.log" 2>&1 &
AGENT_PID=$!
# Leader election on, with the chart's Lease name: the operator may write that Lease only.
"$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$ns" \
  --namespace shop --leader-elect=true --leader-election-id sonde-operator \
  --leader-election-identity rbac-test --metrics-address "127.0.0.1:$(free_port)" \
  >"$tmp/operator-scoped.log" 2>&1 &
op_pid=$!
has_status() { [[ "$(kube_admin GET /apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies/web | jq -c .status)" != null ]]; }
wait_until 600 has_status ||
  { tail -20 "$tmp/operator-scoped.log"; fail "the scoped operator wrote no status for shop/web"; }
kube_admin GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/sonde-operator" | jq -e '.spec.holderIdentity == "rbac-test"' >/dev/null ||
  fail "the scoped operator does not hold its leader Lease"
sleep 3
refused="$(fake_requests_with 403 | jq -c '[.method, .path, .userAgent]')"
[[ -z "$refused" ]] || fail "requests the scoped chart's RBAC refuses:"$'\n'"$refused"
echo "scoped: the policy's status written, the leader Lease held, no request refused"

echo "--- own node only (rbac.agentOwnNodeOnly=true): an agent writes its node's report and Lease only"
stop_agent
kill "$op_pid" 2>/dev/null || true; wait "$op_pid" 2>/dev/null || true; op_pid=""
kill "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true; API_PID=""
helm template sonde "$root/charts/sonde" -n "$ns" --set rbac.agentOwnNodeOnly=true \
  >"$tmp/own-node.yaml" || fail "helm template (own node)"
grep -q '^kind: ValidatingAdmissionPolicy$' "$tmp/own-node.yaml" ||
  fail "rbac.agentOwnNodeOnly=true renders no ValidatingAdmissionPolicy"
rm -f "$tmp/apiserver.out"
FAKE_AGENT_NODE="$node_name"
FAKE_API_IDENTITIES=("agent-bare-token=system:serviceaccount:$ns:sonde-agent")
start_fake_apiserver "$tmp/own-node.yaml" "$ns"
create_node_and_policy
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent-own-node.log" 2>&1 &
AGENT_PID=$!
own_lease() { kube_admin GET "/apis/coordination.k8s.io/v1/namespaces/$ns/leases/sonde-node-$node_name" >/dev/null; }
own_report() { kube_admin GET "/apis/sonde.dev/v1alpha1/namespaces/$ns/profilingnodereports/$node_name" >/dev/null; }
wait_until 600 own_lease || { tail -20 "$tmp/agent-own-node.log"; fail "the agent wrote no Lease of its own node"; }
wait_until 600 own_report || { tail -20 "$tmp/agent-own-node.log"; fail "the agent wrote no report of its own node"; }
echo "own node: the agent wrote its report and its Lease sonde-node-$node_name"
kube_admin POST "/apis/coordination.k8s.io/v1/namespaces/$ns/leases" \
  '{"metadata": {"name": "sonde-operator"}, "spec": {"holderIdentity": "operator-0"}}' >/dev/null ||
  fail "admin cannot create the operator's leader Lease (the policy must match agents only)"
# write TOKEN METHOD PATH BODY: prints the HTTP code, then the Status message.
write() {
  local code
  code="$(curl -s -o "$tmp/write.out" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
    -H "Content-Type: application/json" "$API_URL$3" --data "$4")"
  echo "$code $(jq -r '.message // empty' "$tmp/write.out" 2>/dev/null)"
}
leases="/apis/coordination.k8s.io/v1/namespaces/$ns/leases"
reports="/apis/sonde.dev/v1alpha1/namespaces/$ns/profilingnodereports"
expect_refused() {  # expect_refused WHAT "CODE MESSAGE" WANTED_SUBSTRING
  [[ "$2" == "403 "*"$3"* ]] || fail "$1: got '$2', want 403 with '$3'"
  echo "refused: $1: ${2#403 }"
}
expect_refused "the operator's leader Lease, by an agent" \
  "$(write agent-token PUT "$leases/sonde-operator" '{"metadata": {"name": "sonde-operator"}, "spec": {"holderIdentity": "agent"}}')" \
  "not sonde-operator"
expect_refused "another node's Lease" \
  "$(write agent-token POST "$leases" '{"metadata": {"name": "sonde-node-other-node"}, "spec": {}}')" \
  "only its own node's leases, sonde-node-$node_name, not sonde-node-other-node"
expect_refused "another node's report" \
  "$(write agent-token POST "$reports" '{"apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingNodeReport", "metadata": {"name": "other-node"}}')" \
  "only its own node's profilingnodereports, $node_name, not other-node"
expect_refused "its own Lease, with a token bound to no node" \
  "$(write agent-bare-token PUT "$leases/sonde-node-$node_name" '{"metadata": {"name": "sonde-node-'"$node_name"'"}, "spec": {}}')" \
  "token names no node"
[[ "$(kube_admin GET "$leases/sonde-operator" | jq -r .spec.holderIdentity)" == operator-0 ]] ||
  fail "the operator's leader Lease changed"
kube_admin GET "$leases/sonde-node-other-node" >/dev/null && fail "another node's Lease exists"
refused="$(fake_requests_with 403 | jq -c 'select((.userAgent // "") | test("sonde-agent")) | [.method, .path]')"
[[ -z "$refused" ]] || fail "the agent's own requests were refused:"$'\n'"$refused"
echo "own node: the agent's own writes pass, every other node's and the leader Lease are refused"
echo "PASS: missing RBAC verbs fail with 403 and are reported; a scoped install needs no cluster-wide grant; agents write their own node's report and Lease only"
