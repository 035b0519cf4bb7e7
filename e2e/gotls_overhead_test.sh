#!/usr/bin/env bash
# The Go TLS overhead budget end to end (issue 23 part 3), in cluster mode against the in-repo
# fake API server: two Go TLS clients in cgroups named like containerd containers, selected by
# one ProfilingPolicy with limits.maxOverheadPercent: 1. The chatty one (requests back to back:
# its probes cost tens of percent of its CPU) is detached after the sustained window with
# OverheadExceeded in the node report (and, with sonde-operator in SONDE_BIN, the policy's
# Degraded condition), its binary's probes gone; the quiet one (one request per 200 ms of its
# own CPU work) stays instrumented and counted. Raising the limit (a new generation) instruments
# the chatty one again. Each client runs its own copy of the binary, so detaching one removes
# its probes (probes are per file). Then the same budget from a standalone config file
# (limits.maxOverheadPercent: 1, the clients selected by container id): chatty detached, quiet
# counted. Needs root (cgroups, BPF), helm and Go.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
cluster_test_start sonde-e2e-overhead

mkdir -p "$tmp/bin"
go_build gotls "$tmp/bin/gotls"
for copy in server chatty quiet; do cp "$tmp/bin/gotls" "$tmp/bin/gotls-$copy"; done

policies=/apis/sonde.dev/v1alpha1/namespaces/shop/profilingpolicies

server_id="$(new_id)" chatty_id="$(new_id)" quiet_id="$(new_id)"
run_in_container server "$server_id" "$tmp/bin/gotls-server" server
wait_until 100 grep -q listening "$tmp/server.out" || fail "the server did not start"
server_port="$(awk '/listening/ { print $2 }' "$tmp/server.out")"
run_in_container chatty "$chatty_id" "$tmp/bin/gotls-chatty" calls "$server_port" 0
run_in_container quiet "$quiet_id" "$tmp/bin/gotls-quiet" calls "$server_port" 0 200

kube POST /api/v1/nodes "{\"metadata\": {\"name\": \"$node_name\"}}" >/dev/null ||
  fail "cannot create the Node"
pod() {  # pod NAME ID APP
  kube POST /api/v1/namespaces/shop/pods "$(cat <<JSON
{"metadata": {"name": "$1", "namespace": "shop", "labels": {"app": "$3"}},
 "spec": {"nodeName": "$node_name", "containers": [{"name": "app", "image": "app:1"}]},
 "status": {"phase": "Running",
            "containerStatuses": [{"name": "app", "ready": true, "containerID": "containerd://$2"}]}}
JSON
)" >/dev/null || fail "cannot create pod $1"
}
pod server "$server_id" server
pod chatty "$chatty_id" client
pod quiet "$quiet_id" client

port="$(free_port)"
"$SONDE_BIN/sonde-agent" --cluster --kubeconfig "$tmp/kubeconfig-agent" --node-name "$node_name" \
  --metrics-address "127.0.0.1:$port" >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
  { cat "$tmp/agent.log"; fail "agent did not serve /metrics on $port"; }
if [[ -x "$SONDE_BIN/sonde-operator" ]]; then
  "$SONDE_BIN/sonde-operator" --kubeconfig "$tmp/kubeconfig-operator" --report-namespace "$report_ns" \
    --leader-elect=false --metrics-address "127.0.0.1:$(free_port)" >"$tmp/operator.log" 2>&1 &
  op_pid=$!
fi

series() { echo "{namespace=\"shop\",pod=\"$1\",container=\"app\",node=\"$node_name\"}"; }
tracked() { agent_metric "$port" "sonde_agent_gotls_processes$(series "$1")"; }
tracked_is() { [[ "$(tracked "$1")" == "$2" ]]; }
hits() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk -v p="pod=\"$1\"" '/^container_go_tls_probe_hits_total\{/ && index($0, p) { s += $2 } END { print s + 0 }'
}
probe_cpu() { agent_metric "$port" "container_go_tls_probe_cpu_seconds_total$(series "$1")"; }
attachments() { agent_metric "$port" 'sonde_agent_uprobe_attachments{feature="gotls"}'; }

echo "--- a policy selecting both clients, maxOverheadPercent: 1"
policy='{"apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
  "metadata": {"name": "clients", "namespace": "shop"},
  "spec": {"targets": [{"selector": {"matchLabels": {"app": "client"}}}],
           "instrumentations": {"goTLS": {}}, "limits": {"maxOverheadPercent": 1}}}'
uid="$(kube POST "$policies" "$policy" | jq -r .metadata.uid)"
[[ "$(kube GET "$policies/clients" | jq -c .spec.limits.maxOverheadPercent)" == 1 ]] ||
  fail "the API server did not keep limits.maxOverheadPercent: $(kube GET "$policies/clients" | jq -c .spec.limits)"
start=$SECONDS
wait_until 100 tracked_is chatty 1 || { tail -20 "$tmp/agent.log"; fail "chatty not instrumented"; }
wait_until 100 tracked_is quiet 1 || fail "quiet not instrumented"
[[ -z "$(tracked server)" ]] || fail "the server, not selected, is instrumented"
[[ "$(attachments)" == 6 ]] || fail "gotls attachments $(attachments), want 6 (3 per client binary)"
echo "both clients instrumented; estimated probe CPU: chatty $(probe_cpu chatty) s, quiet $(probe_cpu quiet) s"

entry() {  # entry JQ: of the report's entry for the policy
  kube GET "$report_path" | jq -c ".status.policies[] | select(.uid == \"$uid\") | $1"
}
entry_is() { [[ "$(entry "$1" 2>/dev/null)" == "$2" ]]; }
# The window is 3 intervals of 10 s after a first sample: detached within ~45 s.
wait_until 600 entry_is '[.problems[] | [.reason, .count, .pod, .container]]' '[["OverheadExceeded",1,"chatty","app"]]' ||
  { grep -i overhead "$tmp/agent.log" || true; fail "chatty not OverheadExceeded: $(kube GET "$report_path" | jq -c .status)"; }
echo "after $((SECONDS - start)) s: $(entry '.problems[0].message')"
grep -q 'Go TLS overhead budget exceeded' "$tmp/agent.log" || fail "no warning logged"
[[ "$(agent_metric "$port" sonde_agent_gotls_overhead_exceeded_total)" == 1 ]] ||
  fail "sonde_agent_gotls_overhead_exceeded_total: $(agent_metric "$port" sonde_agent_gotls_overhead_exceeded_total)"
wait_until 100 bash -c "[[ \"\$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_uprobe_attachments\\{feature=\"gotls\"\\}/ { print \$2 }')\" == 3 ]]" ||
  fail "chatty's probes not detached: gotls attachments $(attachments), want 3"
kill -0 "${pids[1]}" || fail "the chatty client died"

# Detached: chatty's hits stand still; quiet is still tracked and counted.
chatty_before="$(hits chatty)" quiet_before="$(hits quiet)"
sleep 1.5
[[ "$(hits chatty)" == "$chatty_before" ]] || fail "chatty still counted: $chatty_before -> $(hits chatty)"
at_least "$(hits quiet)" "$((quiet_before + 6))" || fail "quiet no longer counted: $quiet_before -> $(hits quiet)"
tracked_is quiet 1 || fail "quiet is no longer instrumented"
percent="$(awk -v c="$(probe_cpu chatty)" -v q="$(probe_cpu quiet)" 'BEGIN { print c, q }')"
echo "chatty detached (hits $chatty_before), quiet counted ($quiet_before -> $(hits quiet) hits); probe CPU s: $percent"
expect_contains "$(entry '.problems[0].message')" 'limit 1%' "the OverheadExceeded message"

if [[ -n "$op_pid" ]]; then
  status_is() { [[ "$(kube GET "$policies/clients" | jq -c "$1")" == "$2" ]]; }
  wait_until 200 status_is '.status.conditions[] | select(.type == "Degraded") | [.status, .reason]' '["True","OverheadExceeded"]' ||
    fail "policy not Degraded/OverheadExceeded: $(kube GET "$policies/clients" | jq -c .status.conditions)"
  echo "policy Degraded: $(kube GET "$policies/clients" | jq -c '.status.conditions[] | select(.type == "Degraded") | .message')"
else
  echo "(no sonde-operator in $SONDE_BIN: policy status not checked)"
fi

echo "--- the limit raised to 100 (a new generation): chatty instrumented again"
kube PATCH "$policies/clients" '{"spec": {"limits": {"maxOverheadPercent": 100}}}' >/dev/null ||
  fail "cannot patch the policy"
wait_until 150 tracked_is chatty 1 || fail "chatty not instrumented again after the policy changed"
wait_until 150 entry_is '[.problems[]?]' '[]' || fail "the report still has problems: $(entry .problems)"
chatty_again="$(hits chatty)"
hits_above() { (( $(hits "$1") > $2 )); }
wait_until 100 hits_above chatty "$chatty_again" ||
  fail "chatty's hits do not grow after it was instrumented again"
# Probes attached, detached while calls were in flight and attached again: both clients are
# still running every request to completion (any failed Read or Write exits them with a message).
for i in 1 2; do
  kill -0 "${pids[$i]}" || fail "client ${pids[$i]} died: $(cat "$tmp/chatty.out" "$tmp/quiet.out")"
done
[[ ! -s "$tmp/chatty.out" && ! -s "$tmp/quiet.out" ]] ||
  fail "a client reported an error: $(cat "$tmp/chatty.out" "$tmp/quiet.out")"

echo "--- standalone: the config file's limits.maxOverheadPercent: 1"
stop_agent
if [[ -n "$op_pid" ]]; then kill "$op_pid" 2>/dev/null || true; wait "$op_pid" 2>/dev/null || true; op_pid=""; fi
cat >"$tmp/standalone.yaml" <<YAML
targets:
  - containerId: "$chatty_id"
  - containerId: "$quiet_id"
instrumentations:
  nodejsEventLoop: false
  goTLS: true
limits:
  maxOverheadPercent: 1
YAML
port="$(free_port)"
start_agent "$port" --config "$tmp/standalone.yaml"
standalone_start=$SECONDS
# Standalone labels a process in a container with its container id (docs/configuration.md).
container_hits() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk -v c="container=\"$1\"" '/^container_go_tls_probe_hits_total\{/ && index($0, c) { s += $2 } END { print s + 0 }'
}
exceeded() { [[ "$(agent_metric "$port" sonde_agent_gotls_overhead_exceeded_total)" == "$1" ]]; }
wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"$quiet_id\"'" ||
  { tail -20 "$tmp/agent.log"; fail "standalone: quiet not instrumented"; }
wait_until 600 exceeded 1 ||
  { grep -i overhead "$tmp/agent.log" || true; fail "standalone: chatty not detached for its budget"; }
grep -q 'Go TLS overhead budget exceeded' "$tmp/agent.log" || fail "standalone: no warning logged"
echo "standalone: chatty detached after $((SECONDS - standalone_start)) s: $(grep -m1 'Go TLS overhead budget exceeded' "$tmp/agent.log" | cut -c1-300)"
wait_until 100 bash -c "[[ \"\$(curl -sf http://127.0.0.1:$port/metrics | awk '/^sonde_agent_uprobe_attachments\\{feature=\"gotls\"\\}/ { print \$2 }')\" == 3 ]]" ||
  fail "standalone: chatty's probes not detached: gotls attachments $(attachments), want 3"
chatty_before="$(container_hits "$chatty_id")" quiet_before="$(container_hits "$quiet_id")"
sleep 1.5
[[ "$(container_hits "$chatty_id")" == "$chatty_before" ]] ||
  fail "standalone: chatty still counted: $chatty_before -> $(container_hits "$chatty_id")"
at_least "$(container_hits "$quiet_id")" "$((quiet_before + 6))" ||
  fail "standalone: quiet no longer counted: $quiet_before -> $(container_hits "$quiet_id")"
exceeded 1 || fail "standalone: quiet detached too: $(agent_metric "$port" sonde_agent_gotls_overhead_exceeded_total)"
for i in 1 2; do
  kill -0 "${pids[$i]}" || fail "client ${pids[$i]} died: $(cat "$tmp/chatty.out" "$tmp/quiet.out")"
done
echo "gotls_overhead: ok after $((SECONDS - start)) s"
