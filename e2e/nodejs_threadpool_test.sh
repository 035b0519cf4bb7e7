#!/usr/bin/env bash
# libuv's thread pool (nodejsThreadPool) end to end: the agent standalone with only that
# instrumentation, Debian's node 20 and the official 18, 22 and 24 one after the other, each in a
# cgroup named like a container's, running agent/nodejs_threadpool/tests/threadpool_truth.js with
# UV_THREADPOOL_SIZE=4: a batch of 16 crypto.pbkdf2 (200,000 iterations), then 6 fs.read held on FIFOs (2 released
# after 800 ms, 4 after 400 ms more). The process stamps its tasks with CLOCK_MONOTONIC; from
# those stamps N tasks on T threads give the truth: queued N - T - done, busy min(T, N - done),
# saturated from the submit to the (N - T)th callback. /metrics is scraped every 50 ms meanwhile:
# each scrape's busy threads and queued tasks must match the truth at some instant from 50 ms
# before it (the gauges are the latest 10 ms reading) to 25 ms after (a callback runs after its
# task ended), and container_nodejs_threadpool_saturated_seconds_total must grow by the truth's
# saturated time within 40 ms + 3 %. Every binary's verdict is `measured`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
truth="$(cd "$(dirname "$0")/.." && pwd)/agent/nodejs_threadpool/tests/threadpool_truth.js"
tmp="$SONDE_E2E_TMP"
test_nodes="${SONDE_TEST_NODES:-/opt/sonde/test-nodes}"
cgroot="$(cgroup_v2_dir sonde-e2e-threadpool)"
pids=() cgroups=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_agent
  for c in "${cgroups[@]}"; do remove_cgroup "$c"; done
  rmdir "$cgroot" 2>/dev/null || true
}
trap cleanup EXIT

node_lines  # nodes[18|20|22|24]: each line's binary

port="$(free_port)"
cat >"$tmp/agent.yaml" <<YAML
targets:
  - exe: "/usr/bin/node*"
  - exe: "$test_nodes/*/node"
instrumentations:
  nodejsEventLoop: false
  goTLS: false
  nodejsThreadPool: true
YAML
start_agent "$port" --config "$tmp/agent.yaml"
mkdir -p "$cgroot" "$tmp/fifos"
for i in 0 1 2 3 4 5; do mkfifo "$tmp/fifos/fifo$i"; done

# check_run NAME ID PID MODE: signals the workload, scrapes until its result line, compares.
check_run() {
  python3 - "$port" "$2" "$3" "$tmp/$1.out" "$4" <<'PY'
import os, re, signal, sys, time, urllib.request
port, cid, pid, out, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
THREADS, BEFORE_NS, AFTER_NS = 4, 50_000_000, 25_000_000

def scrape():
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {}
    for m in re.finditer(r'^(container_nodejs_threadpool_\w+)\{([^}]*)\} (\S+)$', text, re.M):
        if f'container="{cid}"' in m.group(2):
            values[m.group(1)] = float(m.group(3))
    return values

def result_line():
    with open(out) as f:
        for line in f:
            if line.startswith(mode + " "):
                return [int(x) for x in line.split()[1:]]
    return None

before = scrape()["container_nodejs_threadpool_saturated_seconds_total"]
os.kill(pid, signal.SIGUSR2)
readings, deadline = [], time.monotonic() + 120
while (numbers := result_line()) is None:
    if time.monotonic() > deadline:
        sys.exit(f"{mode}: no result line in {out}")
    v = scrape()
    readings.append((time.monotonic_ns(), v["container_nodejs_threadpool_busy_threads"],
                     v["container_nodejs_threadpool_queued_tasks"]))
    time.sleep(0.05)
time.sleep(0.1)  # a reading after the last callback
after = scrape()["container_nodejs_threadpool_saturated_seconds_total"]
submit, posted = numbers[0], numbers[1]
callbacks = sorted(numbers[2:] if mode == "pbkdf2" else numbers[4:])
n = len(callbacks)

def state(done):
    left = n - done
    return (min(THREADS, left), max(0, left - THREADS))

def truth(t):
    return (0, 0) if t < submit else state(sum(1 for c in callbacks if c <= t))

def done_by(t):
    return sum(1 for c in callbacks if c <= t)

# A scrape at t shows the latest reading, taken at most BEFORE_NS earlier. It may show the pool
# after `done` tasks ended, `done` at least the callbacks run TAKE_NEXT_NS before that (a pool
# thread takes its next task after posting the callback, and may wait for a CPU in between), at
# most those run by the end of the second run of callbacks after t (a task ended by t has its
# callback run by the first uv__work_done starting after it, however late the main thread is).
# While the tasks are posted and the idle threads wake (before any callback, at most WAKE_NS
# after the posting), any split of the tasks is true.
TAKE_NEXT_NS, WAKE_NS, RUN_GAP_NS = 100_000_000, 250_000_000, 5_000_000
bad = 0
for at, busy, queued in readings:
    lo_t = at - BEFORE_NS
    ramp = at + AFTER_NS >= submit and lo_t <= min(posted + WAKE_NS, callbacks[0])
    posting = lo_t <= posted
    ok = ramp and busy <= THREADS and (busy + queued <= n if posting else busy + queued == n)
    lo = done_by(lo_t - TAKE_NEXT_NS)
    hi = done_by(at)
    for _ in range(2):
        if hi < n:
            hi += 1
            while hi < n and callbacks[hi] - callbacks[hi - 1] < RUN_GAP_NS:
                hi += 1
    ok = ok or (at + AFTER_NS < submit and (busy, queued) == (0, 0))
    ok = ok or any(state(d) == (busy, queued) for d in range(lo, hi + 1))
    if not ok:
        bad += 1
        print(f"  scrape at +{(at - submit) / 1e6:.0f} ms: busy {busy:.0f} queued {queued:.0f}, "
              f"truth {truth(at)}  <-- FAIL")
stairs = []
for _, _, q in readings:
    if not stairs or stairs[-1] != int(q):
        stairs.append(int(q))
# Every thread is busy only once the idle ones woke (late on a loaded machine, unseen by the
# process): from the first scrape showing it, less a scrape period and a reading's age.
start = submit
for at, busy, queued in readings:
    if at >= submit and busy == THREADS and queued > 0:
        start = max(submit, at - BEFORE_NS - 10_000_000)
        break
sat_truth = (callbacks[n - THREADS - 1] - start) / 1e9
tolerance = 0.040 + 0.03 * sat_truth
measured = after - before
ok_sat = abs(measured - sat_truth) <= tolerance
print(f"  {mode}: {len(readings)} scrapes, {bad} off the truth; queued tasks {stairs}; saturated "
      f"{measured:.3f} s, process {sat_truth:.3f} s (tolerance {tolerance:.3f})"
      + ("" if ok_sat else "  <-- FAIL"))
if len(readings) < 10:
    print(f"  {mode}: only {len(readings)} scrapes while it ran  <-- FAIL")
sys.exit(0 if bad == 0 and ok_sat and len(readings) >= 10 else 1)
PY
}

failures=0
for line in 18 20 22 24; do
  for mode in pbkdf2 fifo; do
    name="node$line-$mode"
    id="$(new_id)"
    if [[ $mode == pbkdf2 ]]; then args=(pbkdf2 1 200000); else args=(fifo 800 400 "$tmp/fifos"); fi
    run_in_container "$name" "$id" /usr/bin/env UV_THREADPOOL_SIZE=4 UV_USE_IO_URING=0 \
      "${nodes[$line]}" "$truth" "${args[@]}"
    pid="$LAST_PID"
    wait_until 600 grep -q '^ready' "$tmp/$name.out" || fail "$name did not start: $(cat "$tmp/$name.out")"
    # Read by the agent: its pool's 4 threads (started by the workload's first task) are shown.
    wait_until 300 bash -c "curl -sf http://127.0.0.1:$port/metrics |
      grep -q '^container_nodejs_threadpool_threads{.*container=\"$id\".*} 4$'" ||
      fail "$name: the agent does not read its pool: $(curl -sf "http://127.0.0.1:$port/metrics" | grep threadpool)"
    echo "$name:"
    check_run "$name" "$id" "$pid" "$mode" || failures=$((failures + 1))
    kill "$pid" 2>/dev/null || true
  done
done

metrics="$(curl -sf "http://127.0.0.1:$port/metrics")"
grep '^sonde_agent_nodejs_threadpool_' <<<"$metrics"
if grep '^sonde_agent_nodejs_threadpool_binaries{' <<<"$metrics" | grep -v 'verdict="measured"'; then
  fail "a Node.js binary's thread pool is not read"
fi
check_metrics_documented "$port"
((failures == 0)) || fail "$failures runs off the truth"
echo "PASS: thread-pool gauges and saturated time match each process's own account on Node 18/20/22/24"
