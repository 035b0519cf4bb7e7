// SPDX-License-Identifier: GPL-2.0
/* Node.js event-loop blocked time.
 *
 * The main thread's event loop is idle only while it waits in epoll_wait on the loop's own
 * epoll fd. Everything else -- timers, immediates, I/O callbacks of every kind (including
 * libuv callbacks that leave through tail calls and so have no return to probe), microtasks,
 * synchronous calls, nested loops such as spawnSync's -- is blocked time. So the accounting
 * hooks the kernel's epoll wait (fentry/fexit on do_epoll_wait, or raw syscall tracepoints
 * where that function is not traceable), and reads which epoll fd belongs to the default loop
 * from libuv's default_loop_struct in the process's own memory.
 *
 * Nothing here writes into node's code: no uprobe, no breakpoint there (the libc hook below
 * probes only the C library's file). A breakpoint in node's code
 * would travel with `node --use-largepages`, which copies .text into anonymous huge pages
 * where the kernel has no uprobe for it, and the process would die of SIGTRAP.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "nodejs.h"
#include "nodejs_stalls.h"
#include "pidns.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Syscall numbers of the epoll waits, for the raw-tracepoint fallback; set before load. */
const volatile __s64 nr_epoll_wait = -1;
const volatile __s64 nr_epoll_pwait = -1;
const volatile __s64 nr_epoll_pwait2 = -1;
/* Idle time and the virtual timer (OpenTelemetry's runtime metrics); false when user space
 * exports only blocked time: the verifier then drops that code from every turn. */
const volatile bool runtime_metrics = true;

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_NODEJS_MAX_PROCESSES);
  __type(key, __u32); /* tgid */
  __type(value, struct sonde_loop_state);
} loops SEC(".maps");

static const __u64 block_bounds_ns[SONDE_LOOP_BLOCK_BOUNDS] = SONDE_LOOP_BLOCK_BOUNDS_NS;

/* Long turns (nodejs_stalls.h): processes watched, by tgid, with their threshold in ns (set by
 * user space). One lookup per turn of a tracked loop. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_STALL_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, __u64);
} stall_thresholds SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, SONDE_STALL_EVENTS_BYTES);
} stall_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} stall_events_lost SEC(".maps");

/* A turn of `d` ns that began at `start` ended: reported when tgid is watched and d reaches its
 * threshold. */
static __always_inline void stall_check(__u32 tgid, __u64 start, __u64 d, __u32 exited) {
  __u64* threshold = bpf_map_lookup_elem(&stall_thresholds, &tgid);
  if (!threshold || d < *threshold) return;
  struct sonde_stall_event e = {
      .tgid = tgid, .exited = exited, .start_ns = start, .duration_ns = d};
  if (bpf_ringbuf_output(&stall_events, &e, sizeof e, 0) == 0) return;
  __u32 zero = 0;
  __u64* lost = bpf_map_lookup_elem(&stall_events_lost, &zero);
  if (lost) *lost += 1;
}

/* A busy period that began at busy_since_ns ends now: into the sum and its histogram bucket.
 * Only the main thread writes its entry (user space writes it once, before tracking starts),
 * so plain increments suffice. */
static __always_inline void busy_period_ends(struct sonde_loop_state* s, __u64 now, __u32 tgid,
                                             __u32 exited) {
  if (s->phase != SONDE_LOOP_BUSY || now <= s->busy_since_ns) return;
  __u64 d = now - s->busy_since_ns;
  stall_check(tgid, s->busy_since_ns, d, exited);
  __u32 bucket = SONDE_LOOP_BLOCK_BOUNDS;
  for (__u32 i = 0; i < SONDE_LOOP_BLOCK_BOUNDS; i++) { /* constant bound: unrolled */
    if (d <= block_bounds_ns[i]) {
      bucket = i;
      break;
    }
  }
  s->blocked_ns += d;
  if (bucket <= SONDE_LOOP_BLOCK_BOUNDS) s->blocks[bucket] += 1;
}

/* A wait of the loop that began at idle_since_ns ends now: into the idle sum. */
static __always_inline void wait_period_ends(struct sonde_loop_state* s, __u64 now) {
  if (s->phase == SONDE_LOOP_IDLE && now > s->idle_since_ns) s->idle_ns += now - s->idle_since_ns;
}

/* The virtual timer: what monitorEventLoopDelay({resolution: 10}) would record, from the turns.
 *
 * libuv runs due timers once per iteration, just before the iteration's epoll wait (libuv 1.45+,
 * Node 20+: at the end of the iteration, then pending, idle and prepare handles; libuv 1.44, Node
 * 18: at the start of the next one, before those same handles: the same place between two
 * waits). A timer is due when the loop's time, in whole milliseconds of CLOCK_MONOTONIC (the
 * clock bpf_ktime_get_ns reads), reaches its due time; a repeating timer is rearmed at the
 * loop's time of its callback plus its period. A wait lasts until the earliest due timer: the
 * epoll timeout is the due time minus the loop's time when it began, in whole milliseconds.
 * Each callback records the wall time since the previous one (Histogram::RecordDelta), so a
 * loop blocked for 200 ms records one 200 ms interval, and an idle one 10 ms intervals. */
static __always_inline __u64 ms_floor(__u64 ns) {
  return ns - ns % 1000000ULL;
}

/* `n` callbacks of the virtual timer, each `interval` ns after the one before. */
static __always_inline void delay_record(struct sonde_loop_state* s, __u64 interval, __u64 n) {
  __u32 b = sonde_delay_bucket(interval);
  if (b < SONDE_DELAY_BUCKETS) s->delay[b] += (__u32)n;
  __u64 us = interval / 1000;
  s->delay_sum_ns += n * interval;
  s->delay_sumsq_us2 += n * us * us;
}

/* The timer callback at `now` (its last callback plus the interval just recorded): it is rearmed
 * from the loop's time then. */
static __always_inline void timer_fires(struct sonde_loop_state* s, __u64 now) {
  s->timer_last_ns = now;
  s->timer_due_ns = ms_floor(now) + SONDE_DELAY_TIMER_NS;
}

/* The loop is about to wait at `now`: where libuv runs its due timers. The first wait starts
 * the timer (like RecordDelta, its first callback records nothing). */
static __always_inline void timers_run(struct sonde_loop_state* s, __u64 now) {
  if (s->timer_last_ns == 0) {
    timer_fires(s, now);
  } else if (now >= s->timer_due_ns) {
    delay_record(s, now - s->timer_last_ns, 1);
    timer_fires(s, now);
  }
}

/* Waits with a timeout longer than this are not taken as a timeout (an epoll_pwait2 reached
 * through the C library's hook gives a pointer where the others give milliseconds). */
#define SONDE_WAIT_TIMEOUT_MAX_MS 3600000LL
/* A wait that ends later than this after its timeout was stopped, not late: not a latency. */
#define SONDE_WAKE_LATENCY_MAX_NS 100000000ULL

/* The wait that ends at `now` timed out: how late the thread ran after its timeout. The last
 * one, not an average: each simulated callback is then as late as a real wake-up was, so the
 * delay's tail (percentiles) follows the process's own, and a wait that the timer itself ended
 * (a process that does run monitorEventLoopDelay) puts the simulated callback where the real
 * one ran. */
static __always_inline void wake_latency_update(struct sonde_loop_state* s, __u64 now) {
  if (s->wait_deadline_ns == 0 || now < s->wait_deadline_ns) return;
  __u64 late = now - s->wait_deadline_ns;
  if (late < SONDE_WAKE_LATENCY_MAX_NS) s->wake_latency_ns = late;
}

/* The loop's wait that began at idle_since_ns ended at `now`. The timer would have ended it
 * earlier, at the wait's start plus its timeout (and as late as the thread's waits wake up): the
 * timer's callback then, and one every period after it while the loop stayed idle. */
static __always_inline void timer_wakes(struct sonde_loop_state* s, __u64 now) {
  if (s->timer_last_ns == 0 || s->timer_due_ns <= s->idle_since_ns) return;
  __u64 late = s->wake_latency_ns;
  __u64 wake = s->idle_since_ns + (s->timer_due_ns - ms_floor(s->idle_since_ns)) + late;
  if (now < wake) return;
  delay_record(s, wake - s->timer_last_ns, 1);
  __u64 period = SONDE_DELAY_TIMER_NS + late;
  __u64 more = (now - wake) / period;
  if (more) delay_record(s, period, more);
  timer_fires(s, wake + more * period);
}

/* Processes that exec'd since the probes were loaded and whose main thread has not waited in
 * epoll yet: still starting up. A process the agent selects only later (in a cluster its pod's
 * container id arrives after the exec) is tracked from its loop's first wait when it is here,
 * as if it had been tracked from its exec. Entries leave at the first epoll wait and at exit;
 * LRU, so processes that never wait (shells, sleepers) cannot fill it for the others. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_NODEJS_MAX_PROCESSES);
  __type(key, __u32); /* tgid */
  __type(value, __u8);
} starting SEC(".maps");

/* The tracked process's state when the current task is its main thread, else NULL. A main
 * thread that is not tracked is no longer starting up once it waits (`waiting`). */
static __always_inline struct sonde_loop_state* main_thread_state(bool waiting) {
  if (!current_is_main_thread()) return NULL;
  __u32 tgid = current_tgid_for_agent();
  struct sonde_loop_state* s = bpf_map_lookup_elem(&loops, &tgid);
  if (!s && waiting && bpf_map_lookup_elem(&starting, &tgid)) {
    bpf_map_delete_elem(&starting, &tgid);
  }
  return s;
}

/* A wait on the default loop's epoll fd. The fd is read from the loop's backend_fd when the
 * wait is on another fd than the one last learned: the first wait of the loop, a nested loop
 * (spawnSync: its waits are blocked time), or a loop whose fd changed (uv_loop_fork). A read
 * that fails (page not present) leaves the wait unrecognized: counted as busy, never idle. */
static __always_inline bool is_loop_wait(struct sonde_loop_state* s, int epfd) {
  if (s->flags & SONDE_LOOP_ANY_EPFD) return true;
  if (s->loop_epfd >= 0 && epfd == s->loop_epfd) return true;
  if (!s->backend_fd_ptr) return false;
  int backend_fd = -1;
  if (bpf_probe_read_user(&backend_fd, sizeof backend_fd, (const void*)s->backend_fd_ptr) != 0) {
    return false;
  }
  if (backend_fd <= 0 || backend_fd != epfd) return false;
  s->loop_epfd = backend_fd;
  return true;
}

/* A wait begins: its timeout is `timeout_ms` from now (epoll_wait's argument; <= 0: none or
 * none known) or the absolute `deadline_ns` (do_epoll_wait's; 0: none). */
static __always_inline void wait_begins(int epfd, __s64 timeout_ms, __u64 deadline_ns) {
  struct sonde_loop_state* s = main_thread_state(true);
  if (!s || s->phase == SONDE_LOOP_EXITED || !is_loop_wait(s, epfd)) return;
  __u64 now = bpf_ktime_get_ns();
  busy_period_ends(s, now, current_tgid_for_agent(), 0);
  if (runtime_metrics) {
    timers_run(s, now);
    s->idle_since_ns = now;
    if (timeout_ms > 0 && timeout_ms <= SONDE_WAIT_TIMEOUT_MAX_MS) {
      deadline_ns = now + (__u64)timeout_ms * 1000000ULL;
    }
    s->wait_deadline_ns = deadline_ns > now ? deadline_ns : 0;
  }
  s->phase = SONDE_LOOP_IDLE;
  s->waits += 1;
}

/* The main thread runs one system call at a time, so while the phase is IDLE the next
 * system call exit is the end of the loop's wait (a return, a timeout or a signal). */
static __always_inline void wait_ends(void) {
  struct sonde_loop_state* s = main_thread_state(false);
  if (!s || s->phase != SONDE_LOOP_IDLE) return;
  __u64 now = bpf_ktime_get_ns();
  if (runtime_metrics) {
    wait_period_ends(s, now);
    wake_latency_update(s, now);
    timer_wakes(s, now);
  }
  s->busy_since_ns = now;
  s->phase = SONDE_LOOP_BUSY;
}

/* `to`: the absolute CLOCK_MONOTONIC deadline (ep_timeout_to_timespec), NULL for none, and
 * {0, 0} for a zero timeout. */
SEC("fentry/do_epoll_wait")
int BPF_PROG(epoll_wait_enter, int epfd, struct epoll_event* events, int maxevents,
             struct timespec64* to) {
  __u64 deadline = 0;
  if (runtime_metrics && to) {
    deadline = (__u64)BPF_CORE_READ(to, tv_sec) * 1000000000ULL + (__u64)BPF_CORE_READ(to, tv_nsec);
  }
  wait_begins(epfd, 0, deadline);
  return 0;
}

SEC("fexit/do_epoll_wait")
int BPF_PROG(epoll_wait_exit) {
  wait_ends();
  return 0;
}

/* Only when asked (--wait-source epoll-tracepoints): the syscall tracepoints of the epoll waits.
 * Enabling any syscall tracepoint puts every system call of every process on the slow path
 * (bench/RESULTS.md). They need tracefs (for the event ids). sys_enter_epoll_wait does not
 * exist on arm64. */
SEC("tracepoint/syscalls/sys_enter_epoll_wait")
int epoll_wait_event(struct trace_event_raw_sys_enter* ctx) {
  wait_begins((int)ctx->args[0], (int)ctx->args[3], 0);
  return 0;
}

SEC("tracepoint/syscalls/sys_enter_epoll_pwait")
int epoll_pwait_event(struct trace_event_raw_sys_enter* ctx) {
  wait_begins((int)ctx->args[0], (int)ctx->args[3], 0);
  return 0;
}

SEC("tracepoint/syscalls/sys_enter_epoll_pwait2")
int epoll_pwait2_event(struct trace_event_raw_sys_enter* ctx) {
  wait_begins((int)ctx->args[0], 0, 0); /* its timeout is a relative timespec in user memory */
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_wait")
int epoll_wait_exit_event(struct trace_event_raw_sys_exit* ctx) {
  wait_ends();
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait")
int epoll_pwait_exit_event(struct trace_event_raw_sys_exit* ctx) {
  wait_ends();
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait2")
int epoll_pwait2_exit_event(struct trace_event_raw_sys_exit* ctx) {
  wait_ends();
  return 0;
}

/* Where the kernel has no BPF trampolines (what --wait-source auto then uses): the C library's
 * own epoll_wait / epoll_pwait / epoll_pwait2, attached by user space for each selected process
 * alone (a pid-filtered link on the glibc or musl file it maps, never on node's code), so the
 * kernel puts the breakpoint in that process only: no other process pays anything, on any
 * system call. Return probes are safe here: C stacks do not move. A wait that was in progress
 * when the return probe was attached returns without firing it (the return address is swapped
 * at the entry); user space starts such a process accordingly (event_loop_monitor.h). */
SEC("uprobe")
int BPF_KPROBE(libc_wait_enter, int epfd, void* events, int maxevents, long timeout) {
  wait_begins(epfd, (int)timeout, 0);
  return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(libc_wait_exit) {
  wait_ends();
  return 0;
}

/* Only when asked (--wait-source syscalls): the raw syscall tracepoints, which run on every
 * system call of every process. */
static __always_inline bool is_epoll_wait_nr(long nr) {
  return nr == nr_epoll_wait || nr == nr_epoll_pwait || nr == nr_epoll_pwait2;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_wait, struct pt_regs* regs, long id) {
  if (!is_epoll_wait_nr(id)) return 0;
  __s64 timeout = id == nr_epoll_pwait2 ? 0 : (int)PT_REGS_PARM4_CORE_SYSCALL(regs);
  wait_begins((int)PT_REGS_PARM1_CORE_SYSCALL(regs), timeout, 0);
  return 0;
}

/* The syscall number of a sys_exit; a direct load, as tp_btf arguments are BTF pointers. */
#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) ((regs)->syscallno)
#else
#error "nodejs: unsupported architecture"
#endif

/* Runs on every system call exit of every process: the cheap number test comes before the
 * map lookup. */
SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_wait, struct pt_regs* regs) {
  if (!is_epoll_wait_nr((long)SYSCALL_NR(regs))) return 0;
  wait_ends();
  return 0;
}

/* A new program starts: it is starting up until its main thread waits in epoll. After exec the
 * current task is the thread group's leader, whichever thread called exec. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(program_starts, struct task_struct* task) {
  __u32 tgid = current_tgid_for_agent();
  if (!tgid) return 0; /* outside the agent's pid namespace */
  __u8 one = 1;
  bpf_map_update_elem(&starting, &tgid, &one, BPF_ANY);
  return 0;
}

/* The main thread exits: a busy period in progress ends now, not when user space reads the
 * exit event, and the value is final. Runs for every exiting thread on the node; others
 * return at the pid test or the map lookup. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(main_thread_exit, struct task_struct* task) {
  if (!current_is_main_thread()) return 0;
  __u32 tgid = current_tgid_for_agent();
  bpf_map_delete_elem(&starting, &tgid);
  struct sonde_loop_state* s = bpf_map_lookup_elem(&loops, &tgid);
  if (!s) return 0;
  __u64 now = bpf_ktime_get_ns();
  busy_period_ends(s, now, tgid, 1);
  if (runtime_metrics) wait_period_ends(s, now);
  s->phase = SONDE_LOOP_EXITED;
  return 0;
}
