#!/usr/bin/env bash
# The stack of each long event-loop turn, end to end: the agent standalone on the real kernel
# with nodejsEventLoop.stallThresholdMs 100, real /usr/bin/node (no flag) blocking its loop
# 200 ms in sondeStallCulprit() 4 times, and a second process whose turns (50 ms) never reach
# the threshold. /debug/nodejs/stalls must list each 200 ms turn once, with its duration, >= 10
# samples and the culprit in the top stack, and nothing for the other process.
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
    stallThresholdMs: 100
  goTLS: false
YAML
start_agent "$port" --config "$tmp/agent.yaml"
url="http://127.0.0.1:$port/debug/nodejs/stalls"

# Below the threshold first: its turns are judged before the long ones of the next process.
/usr/bin/node "$workload" short 20 50 60 >"$tmp/short.out" 2>&1 ||
  fail "short workload exited $?: $(cat "$tmp/short.out")"
grep -q "short done 20" "$tmp/short.out" || fail "short workload: $(cat "$tmp/short.out")"
short_pid="$(sed -n 's/^ready pid=//p' "$tmp/short.out")"

/usr/bin/node "$workload" stall 4 200 400 >"$tmp/stall.out" 2>&1 ||
  fail "stall workload exited $?: $(cat "$tmp/stall.out")"
grep -q "stall done 4" "$tmp/stall.out" || fail "stall workload: $(cat "$tmp/stall.out")"
stall_pid="$(sed -n 's/^ready pid=//p' "$tmp/stall.out")"

count_of() {  # count_of PID: stalls listed for PID
  curl -sf "$url" | python3 -c "import json,sys; print(sum(1 for s in json.load(sys.stdin)['stalls'] if s['pid'] == $1))"
}
has_four() { [[ "$(count_of "$stall_pid")" -ge 4 ]]; }
wait_until 50 has_four || { curl -s "$url"; fail "want 4 stalls of pid $stall_pid"; }

curl -sf "$url" >"$tmp/stalls.json"
python3 - "$tmp/stalls.json" "$stall_pid" "$short_pid" <<'PY' || fail "stalls: $(cat "$tmp/stalls.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
stall_pid, short_pid = int(sys.argv[2]), int(sys.argv[3])
mine = [s for s in doc["stalls"] if s["pid"] == stall_pid]
short = [s for s in doc["stalls"] if s["pid"] == short_pid]
assert doc["capacity"] == 256, doc["capacity"]
assert not short, f"a loop whose turns stay under the threshold has stalls: {short}"
assert len(mine) == 4, f"want each of the 4 blocks once, got {len(mine)}"
for s in mine:
    top = s["stacks"][0]["frames"] if s["stacks"] else []
    print(f"stall: {s['durationMs']:.1f} ms, {s['samples']} samples, "
          f"top stack ({s['stacks'][0]['samples'] if s['stacks'] else 0}): {top[:3]}")
    assert 190 <= s["durationMs"] <= 220, f"duration {s['durationMs']} ms, injected 200 (10%)"
    assert s["samples"] >= 10, f"{s['samples']} samples, want >= 10"
    assert s["thresholdMs"] == 100 and s["ongoing"] is False, s
    assert any("sondeStallCulprit" in f for f in top), f"top stack does not name the culprit: {top}"
    assert sum(st["samples"] for st in s["stacks"]) <= s["samples"], s
PY

total="$(agent_metric "$port" sonde_agent_nodejs_stalls_total)"
at_least "${total:-0}" 4 || fail "sonde_agent_nodejs_stalls_total ${total:-none}, want >= 4"
echo "nodejs stalls: ok"
