#!/usr/bin/env bash
# Real-cluster end-to-end check of the whole chart — CRDs, operator, agent DaemonSet, RBAC — for
# a machine with a cluster: kind (a throwaway cluster is created when KIND_CLUSTER is set and no
# kubeconfig works) or any kubeconfig whose nodes run Linux 5.8+ with BTF. Skips, exit 0 with a
# message, when no cluster, kubectl, helm or image is available. It cannot run on the machines
# this repository is developed on (no API server can be installed there); there it is checked
# with `bash -n` and the shellcheck linter.
#
#   SONDE_IMAGE=ghcr.io/me/sonde:dev e2e/k8s/operator_e2e.sh     # current kubeconfig context
#   KIND_CLUSTER=sonde-e2e SONDE_IMAGE=localhost/sonde:0.1.0 e2e/k8s/operator_e2e.sh
#   NODE_IMAGE=node:20-slim ...    # the Node.js workload's image (default node:20-slim)
#
# What it checks:
#   1. `helm upgrade --install` of the chart into a namespace labelled for privileged pods, and
#      both rollouts (operator Deployment, agent DaemonSet) complete;
#   2. the API server's CEL rules reject a policy without targets, one without
#      instrumentations and one with frequencyHz 5000;
#   3. one operator replica holds the Lease;
#   4. every node that runs an agent gets a ProfilingNodeReport, written by that agent (the
#      script writes none);
#   5. a policy selecting a real Node.js pod and a pod that is not Node.js gets status from the
#      agents' reports: Accepted=True, Ready=True/AllNodesReporting, the pods counted, and
#      Degraded=True/SymbolsNotFound for the non-Node.js one; the transitions are Events on
#      the policy;
#   6. deleting the leader pod hands the Lease to the other replica within the lease duration;
#   7. deleting the policy leaves no failing reconciles and no 403 (a verb missing from the
#      chart's RBAC) in the operator's or agents' logs, and no operator or agent restarted
#      (their /healthz and liveness probes held).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ns="${SONDE_NAMESPACE:-sonde-e2e}"
policy_ns="${POLICY_NAMESPACE:-sonde-e2e-apps}"
image="${SONDE_IMAGE:-}"
node_image="${NODE_IMAGE:-node:20-slim}"

skip() { echo "SKIP: $*"; exit 0; }
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

command -v kubectl >/dev/null || skip "kubectl is not installed"
if ! kubectl version --request-timeout=5s >/dev/null 2>&1; then
  if [[ -n "${KIND_CLUSTER:-}" ]] && command -v kind >/dev/null; then
    kind create cluster --name "$KIND_CLUSTER" --wait 120s
    [[ -n "$image" ]] && kind load docker-image "$image" --name "$KIND_CLUSTER"
  else
    skip "no Kubernetes cluster reachable (kubectl version failed); set KIND_CLUSTER to create one with kind"
  fi
fi
command -v helm >/dev/null || skip "helm is not installed"
[[ -n "$image" ]] || skip "set SONDE_IMAGE to an image built from the repository's Dockerfile"

cleanup() {
  kubectl delete namespace "$policy_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  helm uninstall sonde -n "$ns" >/dev/null 2>&1 || true
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || fail "timed out waiting for $what"
    sleep 1
  done
}

step "install the chart (CRDs, operator x2, agent DaemonSet, RBAC)"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
# The agent uses hostPID and BPF capabilities: Pod Security Admission's privileged level.
kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=privileged --overwrite
kubectl create namespace "$policy_ns" --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install sonde "$root/charts/sonde" -n "$ns" \
  --set image.repository="${image%:*}" --set image.tag="${image##*:}" \
  --set operator.leaderElection.leaseDuration=6s \
  --set operator.leaderElection.renewDeadline=4s \
  --set operator.leaderElection.retryPeriod=1s \
  --wait --timeout 300s
kubectl -n "$ns" rollout status deployment/sonde-operator --timeout=180s
kubectl -n "$ns" rollout status daemonset/sonde-agent --timeout=300s

step "CEL validation rejects invalid policies"
reject() {  # reject NAME SPEC_YAML EXPECTED_MESSAGE
  local out
  if out=$(kubectl apply -n "$policy_ns" -f - 2>&1 <<YAML
apiVersion: sonde.dev/v1alpha1
kind: ProfilingPolicy
metadata: {name: $1}
spec: $2
YAML
  ); then
    fail "policy $1 was accepted; expected rejection ($3)"
  fi
  grep -q "$3" <<<"$out" || fail "policy $1 rejected for another reason: $out"
}
reject no-targets '{targets: [], instrumentations: {cpu: {}}}' "targets"
reject no-instrumentations '{targets: [{selector: {matchLabels: {app: x}}}], instrumentations: {}}' \
  "at least one instrumentation"
reject bad-frequency '{targets: [{selector: {matchLabels: {app: x}}}], instrumentations: {cpu: {frequencyHz: 5000}}}' \
  "frequencyHz"

step "one operator replica holds the Lease"
lease="sonde-operator"
holder() { kubectl get lease -n "$ns" "$lease" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
has_holder() { [[ -n "$(holder)" ]]; }
wait_for 60 "a Lease holder" has_holder
leader="$(holder)"
echo "leader: $leader"

step "every agent writes its node's report"
agent_nodes() {
  kubectl get pods -n "$ns" -l app.kubernetes.io/component=agent \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort
}
report_nodes() {
  kubectl get profilingnodereports -n "$ns" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort
}
all_reported() { [[ -n "$(agent_nodes)" && "$(agent_nodes)" == "$(report_nodes)" ]]; }
wait_for 120 "a report from every agent ($(agent_nodes | wc -l) nodes)" all_reported

step "a policy over a Node.js pod and a pod that is not Node.js"
kubectl apply -n "$policy_ns" -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: web-node, labels: {app: web}}
spec:
  containers:
    - name: app
      image: $node_image
      command: [node, -e, "setInterval(() => { const t = Date.now(); while (Date.now() - t < 50) {} }, 500)"]
---
apiVersion: v1
kind: Pod
metadata: {name: web-sleep, labels: {app: web}}
spec:
  containers:
    - name: app
      image: $node_image
      command: [sleep, "3600"]
YAML
kubectl wait -n "$policy_ns" --for=condition=Ready pod/web-node pod/web-sleep --timeout=180s
kubectl apply -n "$policy_ns" -f - <<'YAML'
apiVersion: sonde.dev/v1alpha1
kind: ProfilingPolicy
metadata: {name: web}
spec:
  targets: [{selector: {matchLabels: {app: web}}}]
  instrumentations: {nodejsEventLoop: {}}
YAML
cond() {  # cond TYPE -> "Status/Reason"
  kubectl get profilingpolicy -n "$policy_ns" web \
    -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}/{.status.conditions[?(@.type==\"$1\")].reason}"
}
cond_is() { [[ "$(cond "$1")" == "$2" ]]; }  # cond_is TYPE "Status/Reason"
field_is() { [[ "$(kubectl get profilingpolicy -n "$policy_ns" web -o jsonpath="{.status.$1}")" == "$2" ]]; }
wait_for 60 "Ready=True/AllNodesReporting" cond_is Ready True/AllNodesReporting
[[ "$(cond Accepted)" == "True/Valid" ]] || fail "Accepted is $(cond Accepted)"
wait_for 60 "matchedPods=2" field_is matchedPods 2
wait_for 60 "instrumentedPods=1" field_is instrumentedPods 1
wait_for 60 "Degraded=True/SymbolsNotFound" cond_is Degraded True/SymbolsNotFound
events() {
  kubectl get events -n "$policy_ns" --field-selector involvedObject.name=web,involvedObject.kind=ProfilingPolicy \
    -o jsonpath='{range .items[*]}{.type}/{.reason}{"\n"}{end}'
}
has_event() { events | grep -qx "$1"; }
wait_for 30 "a Normal/AllNodesReporting Event" has_event Normal/AllNodesReporting
wait_for 30 "a Warning/SymbolsNotFound Event" has_event Warning/SymbolsNotFound
echo "events on the policy: $(events | tr '\n' ' ')"

step "failover: delete the leader pod"
start=$SECONDS
kubectl delete pod -n "$ns" "$leader" --grace-period=0 --force >/dev/null 2>&1 || true
new_holder() { local h; h="$(holder)"; [[ -n "$h" && "$h" != "$leader" ]]; }
wait_for 30 "a new Lease holder" new_holder
echo "new leader: $(holder) after $((SECONDS - start)) s (lease 6 s)"

step "delete the policy"
kubectl delete profilingpolicy -n "$policy_ns" web
kubectl delete pod -n "$policy_ns" web-node web-sleep --wait=false
sleep 3
logs() { kubectl logs -n "$ns" -l "app.kubernetes.io/component=$1" --tail=500 --prefix; }
if logs operator | grep "reconcile failed" | grep -vq "409"; then
  fail "the operator logged failed reconciles (other than optimistic-concurrency 409s)"
fi
for component in operator agent; do
  if logs "$component" | grep -q "is forbidden"; then
    fail "the $component was refused by RBAC: $(logs "$component" | grep -m1 "is forbidden")"
  fi
done
restarts="$(kubectl get pods -n "$ns" -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount}{"\n"}{end}' |
  awk -F= '$2 > 0')"
[[ -z "$restarts" ]] || fail "pods restarted (liveness probe or crash): $restarts"
echo "PASS"
