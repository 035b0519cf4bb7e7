#!/usr/bin/env bash
# The stack of each long event-loop turn, end to end, in issue 20's case: the agent standalone
# on the real kernel with nodejsEventLoop.stallThresholdMs 200, real /usr/bin/node (no flag)
# blocking its loop 300 ms in sondeStallCulprit() every 2 s, 3 times, and a second process whose
# turns (30 ms) never reach the threshold. /debug/nodejs/stalls must list each 300 ms turn once,
# with its duration, >= 10 samples and the culprit in the top stack, and nothing for the other
# process. Durations are checked against the injected 300 ms (10%) and against node's own
# account of each turn (libuv's idle time, 5%), which is the truth on a loaded machine where the
# thread waits for a CPU inside its turn. (200 ms stalls at a 100 ms threshold:
# cluster_nodejs_stalls_test.sh.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workload="$(cd "$(dirname "$0")" && pwd)/workloads/stall.js"
tmp="$SONDE_E2E_TMP"
cleanup() { stop_agent; }
trap cleanup EXIT

port="$(free_port)"
cat >"$tmp/agent.yaml" <<YAML
targets:
  - exe: "/usr/bin/node*"
instrumentations:
  nodejsEventLoop:
    stallThresholdMs: 200
  goTLS: false
YAML
start_agent "$port" --config "$tmp/agent.yaml"
url="http://127.0.0.1:$port/debug/nodejs/stalls"

# Below the threshold first: its turns are judged before the long ones of the next process.
/usr/bin/node "$workload" short 20 30 60 >"$tmp/short.out" 2>&1 ||
  fail "short workload exited $?: $(cat "$tmp/short.out")"
grep -q "short done 20" "$tmp/short.out" || fail "short workload: $(cat "$tmp/short.out")"
short_pid="$(sed -n 's/^ready pid=//p' "$tmp/short.out")"

/usr/bin/node "$workload" stall 3 300 2000 >"$tmp/stall.out" 2>&1 ||
  fail "stall workload exited $?: $(cat "$tmp/stall.out")"
grep -q "stall done 3" "$tmp/stall.out" || fail "stall workload: $(cat "$tmp/stall.out")"
stall_pid="$(sed -n 's/^ready pid=//p' "$tmp/stall.out")"

count_of() {  # count_of PID: stalls listed for PID
  curl -sf "$url" | python3 -c "import json,sys; print(sum(1 for s in json.load(sys.stdin)['stalls'] if s['pid'] == $1))"
}
has_three() { [[ "$(count_of "$stall_pid")" -ge 3 ]]; }
wait_until 50 has_three || { curl -s "$url"; fail "want 3 stalls of pid $stall_pid"; }

curl -sf "$url" >"$tmp/stalls.json"
turns="$(sed -n 's/^turns_ms=//p' "$tmp/stall.out")"
short_turns="$(sed -n 's/^turns_ms=//p' "$tmp/short.out")"
cpu="$(sed -n 's/^cpu_ms=//p' "$tmp/stall.out")"
args=("$tmp/stalls.json" "$stall_pid" "$short_pid" "$turns" "$short_turns" "$cpu")
python3 - "${args[@]}" <<'PY' || fail "stalls: $(cat "$tmp/stalls.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
stall_pid, short_pid = int(sys.argv[2]), int(sys.argv[3])
# Node's own account of each turn (libuv's idle time): the truth when other work delays the
# thread, which lengthens the turn for node and agent alike.
node_turns = [float(t) for t in sys.argv[4].split(",")]
mine = [s for s in doc["stalls"] if s["pid"] == stall_pid]
short = [s for s in doc["stalls"] if s["pid"] == short_pid]
assert doc["capacity"] == 256, doc["capacity"]
# The 30 ms turns stay under the threshold unless the thread waited for a CPU that long inside
# one (a loaded machine): then node itself saw the turn that long, and only then may it be listed.
short_turns = [float(t) for t in sys.argv[5].split(",")]
long_short = sum(1 for t in short_turns if t >= 195)
assert len(short) <= long_short, \
    f"a loop whose turns stay under the threshold has stalls: {short} (node's own: {short_turns})"
assert len(mine) == 3, f"want each of the 3 blocks once, got {len(mine)}"
assert len(node_turns) == 3, f"node printed {node_turns}"
cpu_ms = [float(t) for t in sys.argv[6].split(",")]
for s, turn, cpu in zip(sorted(mine, key=lambda s: s["start"]), node_turns, cpu_ms):
    top = s["stacks"][0]["frames"] if s["stacks"] else []
    print(f"stall: {s['durationMs']:.1f} ms (node's own {turn:.1f} ms), {s['samples']} samples "
          f"(node's CPU {cpu:.0f} ms), "
          f"top stack ({s['stacks'][0]['samples'] if s['stacks'] else 0}): {top[:3]}")
    # Date.now() has whole milliseconds: a 300 ms busy loop may end a fraction early.
    assert s["durationMs"] >= 298, f"duration {s['durationMs']} ms, but 300 ms were injected"
    assert abs(s["durationMs"] - turn) <= max(5, 0.05 * turn), \
        f"duration {s['durationMs']} ms, node's own account {turn} ms (5%)"
    if turn <= 330:  # a quiet machine: node saw about what was injected
        assert s["durationMs"] <= 330, f"duration {s['durationMs']} ms, injected 300 (10%)"
    # 199 Hz while the thread runs: >= 10 when it had the CPU (>= 150 ms of the 300), else at
    # least 60% of what its CPU time allows (a loaded machine).
    want = 10 if cpu >= 150 else int(0.6 * cpu * 199 / 1000)
    assert s["samples"] >= want, f"{s['samples']} samples, want >= {want} (node's CPU {cpu} ms)"
    assert s["thresholdMs"] == 200 and s["ongoing"] is False, s
    assert any("sondeStallCulprit" in f for f in top), f"top stack does not name the culprit: {top}"
    assert sum(st["samples"] for st in s["stacks"]) <= s["samples"], s
PY

total="$(agent_metric "$port" sonde_agent_nodejs_stalls_total)"
at_least "${total:-0}" 3 || fail "sonde_agent_nodejs_stalls_total ${total:-none}, want >= 3"
echo "nodejs stalls: ok"
