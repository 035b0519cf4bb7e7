#!/usr/bin/env bash
# CPU profile costs: the agent's own CPU while it samples every process of this host with both
# CPUs busy, at 19 Hz and 99 Hz, symbolizing every drain (the cost of a profile being collected
# all the time, as with a continuous push); and the bytes of symbol tables kept per profiled
# workload (C, Go, Node.js). Usage: bench/cpu/run.sh [BUILD_DIR] (default build; needs root).
set -euo pipefail
build="${1:-build}"
port=0
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../agent/cpu/tests"
# shellcheck source=../agent_lib.sh
source "$here/../agent_lib.sh"

cc -O0 -g -fno-omit-frame-pointer -o "$tmp/hot_c" "$src/hot_c.c"
(cd "$src/hot_go" && GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOENV=off GOPROXY=off \
  CGO_ENABLED=0 go build -o "$tmp/hot_go" .)

spawn() { "$@" >/dev/null 2>&1 & pids+=($!); }
ncpu="$(nproc)"
for _ in $(seq "$ncpu"); do spawn "$tmp/hot_c"; done

busy_pids=("${pids[@]}")
measure_s=30
# measure HZ LABEL [profile args]: the profile command's CPU over measure_s seconds of steady
# state (after 5 s of start-up: BPF load, kallsyms, first parses).
measure() {
  local hz="$1" label="$2"
  shift 2
  "$agent" profile "$@" --seconds $((measure_s + 10)) --frequency "$hz" --output "$tmp/p.pb.gz" \
    2>"$tmp/profile.log" &
  agent_pid=$!
  sleep 5
  t0="$(agent_ticks)"; s0="$(date +%s.%N)"
  sleep "$measure_s"
  t1="$(agent_ticks)"; s1="$(date +%s.%N)"
  wait "$agent_pid"; agent_pid=
  echo "cpu ${hz} Hz, ${label}, ${ncpu} CPUs busy: agent $(cpu_percent "$t0" "$t1" "$s0" "$s1")% of one core ($(grep -o 'profile: [0-9]* samples.*stacks;' "$tmp/profile.log"))"
}
pid_args=()
for p in "${busy_pids[@]}"; do pid_args+=(--pid "$p"); done
for hz in 19 99; do
  measure "$hz" "the ${#busy_pids[@]} busy processes selected" "${pid_args[@]}"
  measure "$hz" "every process of the host"
done
for p in "${pids[@]}"; do kill "$p"; done
pids=()

# Symbol tables kept for one workload: its binaries (program, libc, ...) as SymbolizerCache
# holds them after a profile.
for w in c go node; do
  case "$w" in
    c) spawn "$tmp/hot_c" ;;
    go) spawn "$tmp/hot_go" ;;
    # node --perf-basic-prof leaves V8 logs in its working directory: run it in the scratch one.
    node) spawn bash -c 'cd "$0" && exec node --perf-basic-prof "$1"' "$tmp" "$src/hot.js" ;;
  esac
  sleep 1
  "$agent" profile --pid "${pids[-1]}" --seconds 3 --frequency 99 --output "$tmp/p.pb.gz" \
    2>"$tmp/bytes-$w.log"
  echo "symbols kept for $w: $(grep -o 'symbol tables kept: .*' "$tmp/bytes-$w.log")"
  kill "${pids[-1]}"
done
