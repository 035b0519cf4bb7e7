#!/usr/bin/env bash
# `make image-test`: builds the image (scripts/image.sh) and runs it the ways a user would:
#  - entrypoint: usage, both binaries' --help and --version, the operator never root;
#  - binaries stripped, their debug files in build/image/debug under the same build id;
#  - the agent with the chart's exact securityContext (read from
#    charts/sonde/templates/agent-daemonset.yaml): doctor passes, and standalone it measures a
#    Node.js process on this host that blocks its event loop 200 ms every second, serving its
#    /metrics over TLS with a certificate mounted as kubelet mounts a Secret;
#  - run bare (--privileged --pid host) doctor passes; with the engine's default capabilities
#    doctor blames the missing permission (not the kernel) and the agent names what to add.
# Needs root and podman or docker. Ends with 'image-test: N passed, N failed'. SONDE_IMAGE=REF
# tests an image built already by scripts/image.sh (`make test` builds it beside the other tests).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/scripts/image-lib.sh"
source "$root/e2e/lib.sh"

engine="$(image_engine)" || exit 1
tmp="$(mktemp -d /tmp/sonde-image-test-XXXXXX)"
name="sonde-image-test-$$"
cleanup() {
  "$engine" rm -f "$name" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

if [[ -n "${SONDE_IMAGE:-}" ]]; then
  image="$SONDE_IMAGE"
  echo "image-test: $image (built already)"
else
  "$root/scripts/image.sh" | tee "$tmp/build.log" || { echo "image-test: build failed" >&2; exit 1; }
  image="$(tail -n1 "$tmp/build.log")"
fi
mapfile -t runtime < <(image_engine_flags "$engine")
run=("$engine" run --rm "${runtime[@]}")

passed=0 failed=0
check() {  # check NAME COMMAND...: runs a check function, counts it, shows why it failed
  local what="$1"
  shift
  (set -e; "$@") >"$tmp/check.log" 2>&1
  if (($? == 0)); then
    passed=$((passed + 1))
    echo "--- PASS $what"
    sed 's/^/    /' "$tmp/check.log"
  else
    failed=$((failed + 1))
    echo "--- FAIL $what"
    sed 's/^/    /' "$tmp/check.log"
  fi
}

# The agent's securityContext in the chart, as engine flags. Each setting is read from the
# template so this test follows the chart; a setting it cannot find fails the test.
chart_flags() {
  local t="$root/charts/sonde/templates/agent-daemonset.yaml"
  local caps
  # capabilities.add of the agent container as the chart renders it with its default values.
  caps="$(helm template sonde "$root/charts/sonde" --show-only templates/agent-daemonset.yaml |
    python3 -c 'import sys, yaml
d = yaml.safe_load(sys.stdin)
c = d["spec"]["template"]["spec"]["containers"][0]
print("\n".join(c["securityContext"]["capabilities"]["add"]))')" ||
    fail "cannot render the agent DaemonSet with helm"
  [[ -n "$caps" ]] || fail "no capabilities.add list in the rendered agent DaemonSet"
  grep -q 'drop: \["ALL"\]' "$t" || fail "chart no longer drops ALL: update this test"
  grep -q 'hostPID: true' "$t" || fail "chart no longer sets hostPID: update this test"
  grep -q 'runAsUser: 0' "$t" || fail "chart no longer runs the agent as uid 0: update this test"
  grep -q 'readOnlyRootFilesystem: true' "$t" || fail "chart root filesystem not read-only"
  grep -q 'allowPrivilegeEscalation: false' "$t" || fail "chart allows privilege escalation"
  local seccomp
  seccomp="$(sed -n 's/.*seccompProfile: {type: \([A-Za-z]*\)}.*/\1/p' "$t")"
  flags=(--pid host --user 0 --cap-drop ALL --read-only --security-opt no-new-privileges)
  if [[ "$engine" == podman ]]; then flags+=(--read-only-tmpfs=false); fi
  local c
  for c in $caps; do flags+=(--cap-add "$c"); done
  case "$seccomp" in
    Unconfined) flags+=(--security-opt seccomp=unconfined) ;;
    RuntimeDefault) ;;
    *) fail "chart seccompProfile '$seccomp' not understood: update this test" ;;
  esac
  # The node's tracefs, read-only (agent.hostTracefs, on by default). Nodes usually have it
  # mounted (systemd does); this machine may not, so it is mounted here as a node would have it.
  if grep -q 'mountPath: /sys/kernel/tracing' "$t"; then
    mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing ||
      fail "cannot mount tracefs on the host"
    flags+=(-v /sys/kernel/tracing:/sys/kernel/tracing:ro)
  fi
  printf '%s\n' "${flags[@]}"
}
mapfile -t chart < <(chart_flags) || exit 1
[[ ${#chart[@]} -gt 0 ]] || { echo "image-test: cannot read the chart's securityContext" >&2; exit 1; }
echo "image-test: the chart's agent settings: ${chart[*]}"

entrypoint() {
  local out
  out="$("${run[@]}" "$image" --help)"
  expect_contains "$out" "IMAGE operator ARGS" "IMAGE --help"
  out="$("${run[@]}" "$image" agent --help)"
  expect_contains "$out" "Usage: sonde-agent" "IMAGE agent --help"
  out="$("${run[@]}" "$image" operator --help)"
  expect_contains "$out" "sonde-operator" "IMAGE operator --help"
  local version="${image##*:}"
  [[ "$("${run[@]}" "$image" --version)" == "sonde-agent $version" ]] || fail "agent --version"
  [[ "$("${run[@]}" "$image" operator --version)" == "sonde-operator $version" ]] ||
    fail "operator --version"
  local user
  user="$("$engine" image inspect --format '{{.Config.User}}' "$image")"
  [[ "$user" == 0:0 ]] || fail "default user '$user', want 0:0 (the agent needs root's capabilities)"
}

# Started as root, `IMAGE operator` runs as uid 65532 with a home: a kubeconfig only root may
# read is refused, and the default kubeconfig path is under /home/sonde.
operator_not_root() {
  printf 'apiVersion: v1\nkind: Config\n' >"$tmp/kubeconfig"
  chmod 600 "$tmp/kubeconfig"
  local out
  out="$("${run[@]}" -v "$tmp/kubeconfig:/kubeconfig:ro" "$image" operator --kubeconfig /kubeconfig 2>&1)" &&
    fail "operator started without a cluster: $out"
  expect_contains "$out" "ermission denied" "operator as root reading a root-only file"
  out="$("${run[@]}" "$image" operator 2>&1)" && fail "operator started without a cluster: $out"
  expect_contains "$out" "/home/sonde/.kube/config" "operator's home"
}

stripped_with_debug_files() {
  local ctr
  ctr="$("$engine" create "$image")"
  "$engine" cp "$ctr:/usr/bin/sonde-agent" "$tmp/sonde-agent"
  "$engine" cp "$ctr:/usr/bin/sonde-operator" "$tmp/sonde-operator"
  "$engine" rm "$ctr" >/dev/null
  local bin id debug
  for bin in sonde-agent sonde-operator; do
    readelf -S "$tmp/$bin" | grep -qE '\.(symtab|debug_info)' && fail "$bin is not stripped"
    id="$(readelf -n "$tmp/$bin" | awk '/Build ID:/ { print $3 }')"
    [[ -n "$id" ]] || fail "$bin has no build id"
    debug="$root/build/image/debug/.build-id/${id:0:2}/${id:2}.debug"
    [[ -f "$debug" ]] || fail "no debug file $debug for $bin"
    readelf -S "$debug" 2>/dev/null | grep -q '\.debug_info' || fail "$debug has no .debug_info"
    [[ "$(readelf -n "$debug" 2>/dev/null | awk '/Build ID:/ { print $3 }')" == "$id" ]] ||
      fail "$debug has another build id"
  done
}

doctor_with_chart_settings() {
  local out
  out="$("${run[@]}" "${chart[@]}" "$image" doctor)" || fail "doctor failed:"$'\n'"$out"
  expect_contains "$out" "The agent can run on this node." "doctor"
  grep -E '^process events program +pass' <<<"$out" >/dev/null || fail "no process events:"$'\n'"$out"
  # A real uprobe (Go TLS needs them): the kernel decides what privilege that takes.
  grep -E '^uprobe creation +pass' <<<"$out" >/dev/null ||
    fail "the chart's capabilities cannot create uprobes:"$'\n'"$out"
}

doctor_bare_privileged() {
  local out
  out="$("${run[@]}" --privileged --pid host "$image" doctor)" || fail "doctor failed:"$'\n'"$out"
  expect_contains "$out" "The agent can run on this node." "doctor"
}

# The engine's default capabilities (no BPF, PERFMON, SYS_PTRACE): the missing permission is
# named, the kernel is not blamed, and the agent refuses to start saying what to add.
default_capabilities_named() {
  local out
  out="$("${run[@]}" --pid host "$image" doctor)" && fail "doctor passed without CAP_BPF"
  grep -E '^BPF program: kprobe/uprobe +FAIL +missing permission' <<<"$out" >/dev/null ||
    fail "not a missing permission:"$'\n'"$out"
  [[ "$out" != *"upgrade the kernel"* ]] || fail "blames the kernel:"$'\n'"$out"
  out="$("${run[@]}" --pid host "$image" --standalone 2>&1)" && fail "agent started without CAP_BPF"
  expect_contains "$out" "--cap-add BPF --cap-add PERFMON --cap-add SYS_PTRACE" "agent start"
}

# The agent in the image serves TLS (agent.tls), with a certificate mounted as kubelet mounts a
# Secret: civetweb's OpenSSL comes from the libraries the image ships (civetweb_openssl/).
tls_name="sonde-agent.sonde-system.svc"
agent_get() {  # agent_get PORT PATH: over TLS, trusting only the test CA, checking the name
  curl -sf --max-time 10 --cacert "$tmp/tls/ca.crt" --resolve "$tls_name:$1:127.0.0.1" \
    "https://$tls_name:$1$2"
}

metric() {  # metric PORT CONTAINER: the blocked-time counter of that container, or nothing
  agent_get "$1" /metrics |
    awk -v c="container=\"$2\"" '/^container_nodejs_event_loop_blocked_time_seconds_total\{/ && index($0, c) { print $2 }'
}

has_metric() { [[ -n "$(metric "$1" "$2")" ]]; }

standalone_measures_node() {
  local port workload
  node_pid=  # global: the EXIT trap of this check's subshell reads it
  port="$(free_port)"
  # The container label of a host process is its name, which the kernel cuts to 15 bytes.
  workload="nodeimg-$((RANDOM % 10000))"
  ln -s "$(command -v node)" "$tmp/$workload"
  trap '[[ -n "$node_pid" ]] && kill "$node_pid"; "$engine" rm -f "$name" >/dev/null 2>&1' EXIT
  serving_cert "$tmp/tls" "$tls_name" >/dev/null
  "$engine" run -d --name "$name" "${runtime[@]}" "${chart[@]}" --network host \
    -v "$tmp/tls:/etc/sonde/tls:ro" "$image" --standalone --metrics-address "127.0.0.1:$port" \
    --tls-cert-file /etc/sonde/tls/tls.crt --tls-private-key-file /etc/sonde/tls/tls.key >/dev/null
  wait_until 600 agent_get "$port" /metrics ||
    { "$engine" logs "$name"; fail "agent in the image did not serve /metrics over TLS"; }
  curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$port/metrics" &&
    fail "the agent in the image answered plain HTTP on its TLS port"
  "$tmp/$workload" "$root/e2e/workloads/blocker.js" periodic 0 200 >/dev/null &
  node_pid=$!
  # The agent's first scan of the host's processes (symbols of every binary) can take a while
  # on a busy machine before it follows new ones: up to 3 minutes.
  local deadline=$((SECONDS + 180))
  until has_metric "$port" "$workload"; do
    ((SECONDS < deadline)) || { "$engine" logs "$name"; fail "no blocked-time series for $workload"; }
    sleep 1
  done
  local v1 v2 t1 t2
  v1="$(metric "$port" "$workload")"
  t1="$(date +%s.%N)"
  sleep 5
  v2="$(metric "$port" "$workload")"
  t2="$(date +%s.%N)"
  local rate
  rate="$(awk -v a="$v1" -v b="$v2" -v s="$t1" -v e="$t2" 'BEGIN { printf "%.3f", (b - a) / (e - s) }')"
  echo "blocked time $v1 s -> $v2 s: $rate s/s (the workload blocks 0.2 s/s)"
  awk -v r="$rate" 'BEGIN { exit !(r >= 0.1 && r <= 0.4) }' ||
    { "$engine" logs "$name"; fail "blocked-time rate $rate, want about 0.2"; }
  # With the node's tracefs the wait hook is never the raw syscall tracepoints, which every
  # system call on the node would pay for (fentry where the kernel has trampolines).
  local info
  info="$(agent_get "$port" /metrics | grep '^sonde_agent_info{')"
  echo "$info"
  if printf '%s\n' "${chart[@]}" | grep -q '^/sys/kernel/tracing:'; then
    [[ "$info" != *'wait_source="tp_btf/sys_enter+sys_exit"'* ]] ||
      fail "the agent with the chart's tracefs mount fell back to the raw syscall tracepoints"
  fi
}

check "entrypoint: usage, agent/operator --help and --version, default user" entrypoint
check "operator runs as uid 65532 with a home" operator_not_root
check "binaries stripped, debug files by build id" stripped_with_debug_files
check "doctor with the chart's securityContext" doctor_with_chart_settings
check "doctor run bare (--privileged --pid host)" doctor_bare_privileged
check "default capabilities: missing permission named" default_capabilities_named
check "standalone in the image, over TLS, measures a Node.js process on the host" standalone_measures_node
echo "image-test: $passed passed, $failed failed"
((failed == 0))
