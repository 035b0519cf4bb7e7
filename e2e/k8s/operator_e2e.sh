#!/usr/bin/env bash
# Real-cluster end-to-end check of the sonde CRDs and operator, for a machine with a cluster:
# kind (a throwaway cluster is created when KIND_CLUSTER is set and no kubeconfig works) or
# any kubeconfig. Skips, exit 0 with a message, when no cluster is reachable.
#
#   e2e/k8s/operator_e2e.sh                 # current kubeconfig context
#   SONDE_IMAGE=ghcr.io/me/sonde:dev e2e/k8s/operator_e2e.sh
#   KIND_CLUSTER=sonde-e2e e2e/k8s/operator_e2e.sh
#
# What it checks:
#   1. the CRDs install, and the API server's CEL rules reject a policy without targets, one
#      without instrumentations and one with frequencyHz 5000;
#   2. the operator (two replicas, short lease) becomes ready and one replica holds the Lease;
#   3. a policy gets status (observedGeneration, Accepted=True) and, with no agents,
#      Ready=False/NoAgents; a node report makes it Ready and counts its pods; a report
#      problem makes it Degraded/SymbolsNotFound;
#   4. deleting the leader pod hands the Lease to the other replica within the lease duration;
#   5. deleting the policy leaves no status writes failing in the operator's log.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ns="${SONDE_NAMESPACE:-sonde-e2e}"
policy_ns="${POLICY_NAMESPACE:-sonde-e2e-apps}"
image="${SONDE_IMAGE:-}"

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

step "install the chart (CRDs, operator x2, RBAC)"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
kubectl create namespace "$policy_ns" --dry-run=client -o yaml | kubectl apply -f -
helm upgrade --install sonde "$root/charts/sonde" -n "$ns" \
  --set image.repository="${image%:*}" --set image.tag="${image##*:}" \
  --set operator.leaderElection.leaseDuration=6s \
  --set operator.leaderElection.renewDeadline=4s \
  --set operator.leaderElection.retryPeriod=1s \
  --wait --timeout 180s

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

step "policy status without agents"
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
wait_for 30 "Ready=False/NoAgents" cond_is Ready False/NoAgents
[[ "$(cond Accepted)" == "True/Valid" ]] || fail "Accepted is $(cond Accepted)"

step "a node report makes the policy Ready, a problem makes it Degraded"
node="$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')"
report() {  # report PROBLEMS_JSON
  kubectl apply -n "$ns" -f - <<YAML
apiVersion: sonde.dev/v1alpha1
kind: ProfilingNodeReport
metadata: {name: $node}
spec: {nodeName: $node}
status:
  heartbeatTime: "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  policies:
    - {namespace: $policy_ns, name: web, observedGeneration: 1, matchedPods: 2,
       instrumentedPods: 1, nodejsProcesses: 1, eventLoopBlockedSecondsTotal: 1.5,
       problems: $1}
YAML
}
report '[{reason: SymbolsNotFound, pod: web-0, container: app, message: "no uv__io_poll"}]'
wait_for 30 "Degraded=True/SymbolsNotFound" cond_is Degraded True/SymbolsNotFound
[[ "$(cond Ready)" == "True/AllNodesReporting" ]] || fail "Ready is $(cond Ready)"
[[ "$(kubectl get profilingpolicy -n "$policy_ns" web -o jsonpath='{.status.matchedPods}')" == 2 ]] ||
  fail "matchedPods is not 2"
report '[]'
wait_for 30 "Degraded=False/AsExpected" cond_is Degraded False/AsExpected

step "failover: delete the leader pod"
start=$SECONDS
kubectl delete pod -n "$ns" "$leader" --grace-period=0 --force >/dev/null 2>&1 || true
new_holder() { local h; h="$(holder)"; [[ -n "$h" && "$h" != "$leader" ]]; }
wait_for 30 "a new Lease holder" new_holder
echo "new leader: $(holder) after $((SECONDS - start)) s (lease 6 s)"

step "delete the policy"
kubectl delete profilingpolicy -n "$policy_ns" web
sleep 3
if kubectl logs -n "$ns" -l app.kubernetes.io/component=operator --tail=200 | grep "reconcile failed" | grep -vq "409"; then
  fail "the operator logged failed reconciles (other than optimistic-concurrency 409s)"
fi
echo "PASS"
