#!/usr/bin/env bash
# Where a never-seen Go binary's attach time goes, seen from the kernel: runs the never-seen part
# of first_requests.sh (fresh copies of a Go client, 50 requests each right after exec) under
# `perf record -a` with tracepoints only (no probe in the agent), and prints per copy, in ms
# after its exec: the agent's first BPF_LINK_CREATE (enter -> return; that
# link is the (*Conn).Write probe, the two Read links usually follow within 0.1 ms), the agent's
# last one returning, the client's connect and first request, and how many of its requests were
# written after the first link returned and after the last one (what the agent can count lies
# in between: a request needs its Write and its response's Read seen), next to how many the
# agent counted. A request is a write on the socket the client connected, after its two TLS
# handshake writes (ClientHello, Finished); the binary's attach is three links on one thread.
# Usage: bench/gotls/attach_timeline.sh [BUILD_DIR] [ROUNDS] [AGENT_ARGS...]
#   (root, perf; prints first_requests.sh's table, then the timeline as Markdown)
set -euo pipefail
build="${1:-build}"
rounds="${2:-3}"
shift $(($# < 2 ? $# : 2))
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v perf >/dev/null || { echo "bench: perf is not installed (Debian: linux-perf)" >&2; exit 1; }
out="$(mktemp -d /tmp/sonde-timeline-XXXXXX)"
trap 'rm -rf "$out"' EXIT
# BPF_LINK_CREATE is bpf() command 28. Filters by comm: the agent's threads are named
# sonde-agent, the copies fresh-R-N.
perf record -q -a -o "$out/perf.data" \
  -e sched:sched_process_exec \
  -e syscalls:sys_enter_bpf --filter 'cmd == 28' \
  -e syscalls:sys_exit_bpf --filter 'comm ~ "sonde*"' \
  -e syscalls:sys_enter_connect --filter 'comm ~ "fresh*"' \
  -e syscalls:sys_enter_write --filter 'comm ~ "fresh*"' \
  -- env FIRST_REQUESTS_FRESH_ONLY=1 FIRST_REQUESTS_AGENT_ARGS="$*" \
  "$here/first_requests.sh" "$build" "$rounds" >"$out/first_requests.txt"
cat "$out/first_requests.txt"
echo
perf script -i "$out/perf.data" -F comm,tid,time,event,trace >"$out/events.txt" 2>/dev/null
python3 - "$out/events.txt" "$out/first_requests.txt" <<'PY'
import collections, re, statistics, sys
events = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$", line)
    if m:
        comm, tid, t, name, rest = m.groups()
        events.append((float(t) * 1e3, comm, int(tid), name.split(":")[1], rest))
events.sort(key=lambda e: e[0])
counted = re.search(r"right after exec \| ([\d ]+) of 50", open(sys.argv[2]).read()).group(1).split()
execs = [e for e in events if e[3] == "sched_process_exec" and "/fresh-" in e[4]]
summary = collections.defaultdict(list)
fmt = lambda x: "-" if x is None else f"{x:.1f}"
print("| copy | agent's first link (Write) | last link returned | connect "
      "| 1st request | requests written after the first / last link | counted |")
print("|---|---|---|---|---|---|---|")
for i, (t0, _, _, _, rest) in enumerate(execs):
    name = re.search(r"filename=\S*/(fresh-\S+)", rest).group(1)
    end = execs[i + 1][0] if i + 1 < len(execs) else t0 + 250
    window = [e for e in events if t0 <= e[0] < min(end, t0 + 250)]
    links, entered = collections.defaultdict(list), {}
    for t, comm, tid, ev, _ in window:
        if ev == "sys_enter_bpf":
            entered[tid] = t
        elif ev == "sys_exit_bpf" and tid in entered:
            links[tid].append((entered.pop(tid) - t0, t - t0))
    agent = next((l for l in links.values() if len(l) >= 3), None)
    mine = [e for e in window if e[1] == name[:15]]
    connect = next((e[0] - t0 for e in mine if e[3] == "sys_enter_connect"), None)
    fd = lambda rest: re.search(r"fd: (0x[0-9a-f]+)", rest).group(1)
    sock = next((fd(e[4]) for e in mine if e[3] == "sys_enter_connect"), None)
    requests = [e[0] - t0 for e in mine if e[3] == "sys_enter_write" and fd(e[4]) == sock][2:]
    after = lambda live: sum(1 for t in requests if live is not None and t > live)
    c = counted[i] if i < len(counted) else "-"
    print(f"| {name} | {f'{agent[0][0]:.1f} → {agent[0][1]:.1f}' if agent else '-'} "
          f"| {fmt(agent[-1][1] if agent else None)} "
          f"| {fmt(connect)} | {fmt(requests[0] if requests else None)} "
          f"| {after(agent[0][1] if agent else None)} / {after(agent[-1][1] if agent else None)} "
          f"of {len(requests)} | {c} |")
    if agent:
        summary["exec → the agent's first BPF_LINK_CREATE"].append(agent[0][0])
        summary["that BPF_LINK_CREATE's own time"].append(agent[0][1] - agent[0][0])
        summary["exec → the last link returned"].append(agent[-1][1])
    if requests:
        summary["exec → the client's first request"].append(requests[0])
print()
print("| ms | n | mean | p50 | p90 | min | max |")
print("|---|---|---|---|---|---|---|")
for what, v in summary.items():
    v = sorted(v)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
    print(f"| {what} | {len(v)} | {statistics.mean(v):.2f} | {q(0.5):.2f} | {q(0.9):.2f} "
          f"| {v[0]:.2f} | {v[-1]:.2f} |")
PY
