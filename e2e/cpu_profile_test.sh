#!/usr/bin/env bash
# CPU profiles end to end, standalone: the agent samples a C program with one hot function
# (a target of its config); /debug/pprof/profile?container= serves a pprof that `go tool pprof`
# reads with that function on top, the folded format names it too, and the same profiles are
# pushed to a Pyroscope ingest stand-in (the config's instrumentations.cpu.pyroscope) labelled
# with the container, readable by `go tool pprof` as well.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$SONDE_E2E_TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

# The workload: frame pointers kept, so its stacks are walked; its name is the container label.
workload="sonde-hot-$((RANDOM % 10000))"
cc -O1 -fno-omit-frame-pointer -o "$tmp/$workload" "$root/agent/cpu/tests/hot_c.c" ||
  fail "cannot build the hot C workload"

mkdir -p "$tmp/pushes"
python3 "$root/e2e/workloads/pyroscope_receiver.py" "$tmp/pushes" /pyro \
  >"$tmp/receiver.out" 2>"$tmp/receiver.err" &
pids+=($!)
wait_until 100 grep -q listening "$tmp/receiver.out" || fail "the Pyroscope stand-in did not start"
receiver_port="$(awk '/listening/ { print $2 }' "$tmp/receiver.out")"

cat >"$tmp/agent.yaml" <<YAML
targets:
  - exe: "$tmp/sonde-hot-*"
instrumentations:
  nodejsEventLoop: false
  goTLS: false
  cpu:
    enabled: true
    frequencyHz: 99
    pyroscope: {url: "http://127.0.0.1:$receiver_port/pyro", intervalSeconds: 5, application: e2e}
YAML
port="$(free_port)"
start_agent "$port" --config "$tmp/agent.yaml"

"$tmp/$workload" >"$tmp/workload.out" &
pids+=($!)
wait_until 100 grep -q ready "$tmp/workload.out" || fail "the workload did not start"
# Selected at its exec: samples counted for its container.
wait_until 300 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^container_cpu_profile_samples_total{.*container=\"$workload\"'" ||
  fail "no CPU samples counted for $workload: $(curl -sf "http://127.0.0.1:$port/metrics" | grep cpu_profile)"

export GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath"
top_function() {  # top_function FILE: the function with the most flat samples
  go tool pprof -top "$1" 2>/dev/null | awk '/flat%/ { t = 1; next } t && NF >= 6 { print $6; exit }'
}

curl -sf --max-time 30 -o "$tmp/served.pb.gz" \
  "http://127.0.0.1:$port/debug/pprof/profile?seconds=3&container=$workload" ||
  fail "/debug/pprof/profile failed"
top="$(top_function "$tmp/served.pb.gz")"
echo "served profile: top function $top"
[[ "$top" == sonde_hot_c_function ]] ||
  fail "served profile's top function is '$top':"$'\n'"$(go tool pprof -top "$tmp/served.pb.gz" 2>&1 | head -20)"

folded="$(curl -sf --max-time 30 "http://127.0.0.1:$port/debug/pprof/profile?seconds=2&container=$workload&format=folded")" ||
  fail "folded profile failed"
expect_contains "$folded" "sonde_hot_c_function" "folded profile"

# Pushes: every 5 s, one per container; the workload's carries its labels and reads in pprof.
wait_until 300 bash -c "grep -l '$workload' '$tmp/pushes/'*.json" ||
  fail "no push for $workload reached the receiver: $(cat "$tmp/receiver.err")"
push="$(grep -l "$workload" "$tmp/pushes/"*.json | head -1)"
name="$(jq -r .name "$push")"
echo "pushed: $name (sampleRate $(jq -r .sampleRate "$push"))"
expect_contains "$name" "e2e.cpu{" "pushed name"
expect_contains "$name" "container=$workload" "pushed name"
[[ "$(jq -r .sampleRate "$push")" == 99 ]] || fail "sampleRate is not the configured 99 Hz"
top="$(top_function "${push%.json}.pb.gz")"
[[ "$top" == sonde_hot_c_function ]] || fail "pushed profile's top function is '$top'"
ok="$(agent_metric "$port" 'sonde_cpu_profile_pushes_total{result="ok"}')"
at_least "${ok:-0}" 1 || fail "sonde_cpu_profile_pushes_total{result=\"ok\"} is '${ok:-}'"
echo "cpu_profile: served and pushed profiles name sonde_hot_c_function; $ok pushes accepted"
