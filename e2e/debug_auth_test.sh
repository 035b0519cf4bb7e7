#!/usr/bin/env bash
# Who may read a CPU profile from an in-cluster agent: the agent asks the (fake) API server, as
# the real one would answer, with a TokenReview for the bearer token (audience "sonde", the
# agent's default) and a SubjectAccessReview for get profiles.sonde.dev in the profile's
# namespace. alice may read
# namespace team-a (a RoleBinding to the chart's profile-reader ClusterRole) and nothing else;
# no, forged, expired and wrong-audience tokens get 401, bob (no binding) 403; /metrics stays
# open; with the API server gone a token not yet decided gets 503. The routes are served on
# --debug-address (the pod's loopback in the chart's agent.debugAuth.loopbackPort), not on the
# metrics port. With --metrics-authorization (the chart's metrics.authorization), /metrics answers
# only tokens whose user may get that non-resource URL (the chart's metrics-reader ClusterRole).
# Needs root and helm.
# e2e-lane: beside (scripts/run-e2e.sh: no workload, no cgroup, nothing timed on the host)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
tmp="$SONDE_E2E_TMP"
ns="sonde-system"

[[ $EUID -eq 0 ]] || fail "needs root (the agent loads BPF)"
command -v helm >/dev/null || fail "helm not found (make deps)"
API_PID=""
cleanup() {
  stop_agent
  if [[ -n "$API_PID" ]]; then kill "$API_PID" 2>/dev/null || true; wait "$API_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

helm template sonde "$root/charts/sonde" -n "$ns" >"$tmp/chart.yaml" || fail "helm template"
grep -q 'name: sonde-profile-reader' "$tmp/chart.yaml" || fail "the chart has no profile-reader ClusterRole"
cat >>"$tmp/chart.yaml" <<'YAML'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-profiles, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sonde-profile-reader}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol-reads-profiles, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sonde-profile-reader}
subjects: [{kind: User, name: carol}]
YAML
# carol's tokens carry extra attributes, which the (fake) authorizer wants to see in the review;
# alice-elsewhere is a token for another service from an authenticator that ignores the
# audiences it is asked for.
FAKE_API_IDENTITIES=("alice-token=alice;aud=sonde" "alice-api=alice" "alice-old=alice;aud=sonde;expired"
                     "bob-token=bob;aud=sonde" "late-token=alice;aud=sonde"
                     "carol-token=carol;aud=sonde;extra=scopes:profiles|read"
                     "alice-elsewhere=alice;aud=vault;ignores-audiences")
start_fake_apiserver "$tmp/chart.yaml" "$ns"
kube_admin POST /api/v1/nodes '{"metadata": {"name": "auth-node"}}' >/dev/null || fail "cannot create the Node"

port="$(free_port)" dport="$(free_port)"
while [[ "$dport" == "$port" ]]; do dport="$(free_port)"; done
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name auth-node \
  --metrics-address "127.0.0.1:$port" --debug-address "127.0.0.1:$dport" \
  >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { tail -20 "$tmp/agent.log"; fail "the agent did not serve /metrics"; }

# status TOKEN QUERY: the HTTP status of a one-second profile request ("" TOKEN: none sent).
status() {
  local auth=()
  [[ -n "$1" ]] && auth=(-H "Authorization: Bearer $1")
  curl -s -o "$tmp/body" -w '%{http_code}' "${auth[@]}" \
    "http://127.0.0.1:$dport/debug/pprof/profile?seconds=1$2"
}
expect() {  # expect STATUS TOKEN QUERY WHAT
  local got
  got="$(status "$2" "$3")"
  [[ "$got" == "$1" ]] || fail "$4: got $got, want $1 ($(head -c 300 "$tmp/body"))"
  echo "ok: $4 -> $got"
}
expect 401 "" "&namespace=team-a" "no token"
expect 401 forged-token "&namespace=team-a" "a forged token"
expect 401 alice-old "&namespace=team-a" "an expired token"
grep -q 'expired' "$tmp/body" || fail "the 401 does not say the token expired"
expect 401 alice-api "&namespace=team-a" "a token for another audience"
grep -q 'audiences' "$tmp/body" || fail "the 401 does not name the audience"
expect 401 alice-elsewhere "&namespace=team-a" "a token for another service, audiences unchecked by its authenticator"
grep -q 'not issued for the audience' "$tmp/body" || fail "the 401 does not say the audience is not sonde's"
expect 200 carol-token "&namespace=team-a" "carol, her extra attributes passed on to the review"
expect 200 alice-token "&namespace=team-a" "alice, her namespace"
expect 403 alice-token "&namespace=team-b" "alice, another namespace"
expect 403 alice-token "" "alice, every namespace"
expect 403 bob-token "&namespace=team-a" "bob, no binding"
curl -sf -o /dev/null "http://127.0.0.1:$port/metrics" || fail "/metrics needs no token"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer alice-token" \
  "http://127.0.0.1:$port/debug/pprof/profile?seconds=1&namespace=team-a")"
[[ "$code" == 404 ]] || fail "/debug/ is still served on the metrics port with --debug-address ($code)"
curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || fail "/healthz needs no token"

# Decisions are cached: asking again sends no review.
before="$(agent_metric "$port" sonde_agent_access_reviews_total)"
expect 200 alice-token "&namespace=team-a" "alice again (cached)"
expect 401 forged-token "&namespace=team-a" "the forged token again (cached)"
after="$(agent_metric "$port" sonde_agent_access_reviews_total)"
[[ "$before" == "$after" ]] || fail "cached decisions sent reviews ($before -> $after)"

# The API server gone: a token not decided yet is a 503, never let through.
kill "$API_PID"; wait "$API_PID" 2>/dev/null || true; API_PID=""
expect 503 late-token "&namespace=team-a" "the API server down"
n="$(agent_metric "$port" 'sonde_agent_debug_requests_total{result="unavailable"}')"
[[ "$n" == 1 ]] || fail "unavailable requests counted $n, want 1"
echo "debug routes: tokens reviewed by the API server, namespaces by RBAC, 503 without it"

echo "--- metrics.authorization: /metrics as kube-rbac-proxy guards it"
stop_agent
helm template sonde "$root/charts/sonde" -n "$ns" --set metrics.authorization.enabled=true \
  --set 'metrics.authorization.subjects[0].kind=ServiceAccount' \
  --set 'metrics.authorization.subjects[0].name=prometheus' \
  --set 'metrics.authorization.subjects[0].namespace=monitoring' >"$tmp/metrics-auth.yaml" ||
  fail "helm template (metrics.authorization)"
grep -q -- '- --metrics-authorization' "$tmp/metrics-auth.yaml" ||
  fail "metrics.authorization.enabled does not pass --metrics-authorization to the agent"
rm -f "$tmp/apiserver.out"
FAKE_API_IDENTITIES=("reader-token=system:serviceaccount:$ns:sonde-metrics-reader"
                     "prom-token=system:serviceaccount:monitoring:prometheus" "bob-token=bob")
start_fake_apiserver "$tmp/metrics-auth.yaml" "$ns"
kube_admin POST /api/v1/nodes '{"metadata": {"name": "auth-node"}}' >/dev/null || fail "cannot create the Node"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name auth-node \
  --metrics-address "127.0.0.1:$port" --metrics-authorization >"$tmp/agent-metrics.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" ||
  { tail -20 "$tmp/agent-metrics.log"; fail "the agent did not start"; }
scrape() {  # scrape TOKEN: the HTTP status of /metrics, the body in $tmp/scrape
  local auth=()
  [[ -n "$1" ]] && auth=(-H "Authorization: Bearer $1")
  curl -s -o "$tmp/scrape" -w '%{http_code}' "${auth[@]}" "http://127.0.0.1:$port/metrics"
}
expect_scrape() {  # expect_scrape STATUS TOKEN WHAT
  local got
  got="$(scrape "$2")"
  [[ "$got" == "$1" ]] || fail "$3: /metrics answered $got, want $1: $(head -c 300 "$tmp/scrape")"
  echo "$3: $got"
}
expect_scrape 401 "" "no token"
expect_scrape 401 forged-token "a token the API server does not know"
expect_scrape 403 bob-token "bob, not bound to the metrics reader"
expect_scrape 200 reader-token "the chart's metrics reader (the PodMonitor's token)"
grep -q '^sonde_agent_metrics_requests_total{result="forbidden"} 1$' "$tmp/scrape" ||
  fail "the forbidden scrape is not counted: $(grep sonde_agent_metrics_requests_total "$tmp/scrape")"
expect_scrape 200 prom-token "Prometheus' own service account, bound by metrics.authorization.subjects"
before="$(grep '^sonde_agent_access_reviews_total ' "$tmp/scrape" | awk '{print $2}')"
expect_scrape 200 prom-token "the same token again (cached)"
after="$(grep '^sonde_agent_access_reviews_total ' "$tmp/scrape" | awk '{print $2}')"
[[ "$before" == "$after" ]] || fail "a cached scrape sent reviews ($before -> $after)"
curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || fail "/healthz needs no token"
echo "metrics: served only to tokens whose user may get /metrics; the probes stay open"
