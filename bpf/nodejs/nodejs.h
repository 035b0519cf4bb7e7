/* Node.js event-loop accounting, shared by bpf/nodejs/nodejs.bpf.c and the agent (C only).
 *
 * Blocked time is the wall time the main thread spends outside the epoll waits of its event
 * loop, idle time the wall time inside them. The kernel side keeps, per tracked process, the sums
 * of finished busy and idle periods and the start of the current one; user space adds the
 * in-progress part at scrape time.
 *
 * Event-loop delay, as Node's perf_hooks.monitorEventLoopDelay({resolution: 10}) reports it: that
 * API records the interval between consecutive callbacks of a repeating 10 ms libuv timer
 * (Histogram::RecordDelta in node's src/histogram.cc), so an idle loop reads about 10 ms. The
 * kernel simulates that timer from the turns it sees (nodejs.bpf.c, "virtual timer") and counts
 * each interval into a log-linear histogram; user space takes windows of it.
 */
#ifndef SONDE_BPF_NODEJS_H
#define SONDE_BPF_NODEJS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum sonde_loop_phase {
  SONDE_LOOP_UNKNOWN = 0, /* not seen a loop wait yet (start-up, or just tracked) */
  SONDE_LOOP_IDLE = 1,    /* inside the loop's epoll wait */
  SONDE_LOOP_BUSY = 2,    /* running callbacks, timers, JS: blocked since busy_since_ns */
  SONDE_LOOP_EXITED = 3,  /* the main thread exited: blocked_ns is final */
};

enum sonde_loop_flags {
  /* No libuv symbols: every epoll wait of the main thread counts as the loop's wait. */
  SONDE_LOOP_ANY_EPFD = 1,
};

/* Upper bounds of the block-duration histogram (each finished busy period of the loop is one
 * observation), in nanoseconds; the agent exports them in seconds. A last, unbounded bucket
 * follows. */
#define SONDE_LOOP_BLOCK_BOUNDS_NS                                                             \
  {                                                                                            \
    1000000ULL, 5000000ULL, 10000000ULL, 25000000ULL, 50000000ULL, 100000000ULL, 250000000ULL, \
        500000000ULL, 1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL              \
  }
#define SONDE_LOOP_BLOCK_BOUNDS 12

/* The delay histogram: bucket 0 holds intervals below 2^SONDE_DELAY_MIN_SHIFT ns (8.4 ms; a
 * 10 ms timer cannot fire sooner than 9 ms after its last callback), then SONDE_DELAY_SUB
 * buckets per power of two up to 2^(SONDE_DELAY_MIN_SHIFT + SONDE_DELAY_OCTAVES) ns (68.7 s),
 * then one bucket above. A bucket is 1/8 of its octave wide: a value read as its bucket's middle
 * is off by at most 6.25%. */
#define SONDE_DELAY_MIN_SHIFT 23
#define SONDE_DELAY_SUB_BITS 3
#define SONDE_DELAY_SUB (1u << SONDE_DELAY_SUB_BITS)
#define SONDE_DELAY_OCTAVES 13
#define SONDE_DELAY_BUCKETS (SONDE_DELAY_OCTAVES * SONDE_DELAY_SUB + 2)
/* The simulated timer's period, as monitorEventLoopDelay({resolution: 10}) asks libuv. */
#define SONDE_DELAY_TIMER_NS 10000000ULL

/* The delay bucket of an interval of v ns (a fixed number of steps: no loop for the verifier). */
static inline __u32 sonde_delay_bucket(__u64 v) {
  if (v < (1ULL << SONDE_DELAY_MIN_SHIFT)) return 0;
  if (v >= (1ULL << (SONDE_DELAY_MIN_SHIFT + SONDE_DELAY_OCTAVES))) return SONDE_DELAY_BUCKETS - 1;
  __u32 msb = 0;
  __u64 x = v;
  if (x >> 32) {
    x >>= 32;
    msb += 32;
  }
  if (x >> 16) {
    x >>= 16;
    msb += 16;
  }
  if (x >> 8) {
    x >>= 8;
    msb += 8;
  }
  if (x >> 4) {
    x >>= 4;
    msb += 4;
  }
  if (x >> 2) {
    x >>= 2;
    msb += 2;
  }
  if (x >> 1) msb += 1;
  __u32 sub = (__u32)(v >> (msb - SONDE_DELAY_SUB_BITS)) & (SONDE_DELAY_SUB - 1);
  return 1 + (msb - SONDE_DELAY_MIN_SHIFT) * SONDE_DELAY_SUB + sub;
}

struct sonde_loop_state {
  __u64 blocked_ns;     /* sum of finished busy periods (the histogram's sum) */
  __u64 busy_since_ns;  /* bpf_ktime_get_ns() when the current busy period began */
  __u64 waits;          /* loop waits seen, for self-checks and the iteration cost bench */
  __u64 backend_fd_ptr; /* runtime address of the default loop's backend_fd (an int in the
                           process's memory), 0 = unknown */
  __s32 loop_epfd;      /* epoll fd of the default loop, -1 until learned */
  __u32 phase;          /* enum sonde_loop_phase */
  __u32 flags;          /* enum sonde_loop_flags */
  __u32 pad;
  /* Finished busy periods by duration, non-cumulative; the last is > every bound. */
  __u64 blocks[SONDE_LOOP_BLOCK_BOUNDS + 1];
  __u64 idle_ns;       /* sum of finished loop waits */
  __u64 idle_since_ns; /* bpf_ktime_get_ns() when the current wait began (phase IDLE) */
  /* The virtual 10 ms timer: its last callback (0: not started) and when it is due next. */
  __u64 timer_last_ns;
  __u64 timer_due_ns;
  /* Its callback intervals: sum (ns), sum of squares (us^2: 68 s squared still fits), and the
   * count per bucket (sonde_delay_bucket), non-cumulative. */
  __u64 delay_sum_ns;
  __u64 delay_sumsq_us2;
  /* When the current wait times out (CLOCK_MONOTONIC; 0: no timeout known), and how late the
   * main thread ran after the last wait that timed out: the timer's simulated callbacks are
   * that late too (timer slack, wake-up, waiting for a CPU). */
  __u64 wait_deadline_ns;
  __u64 wake_latency_ns;
  __u32 delay[SONDE_DELAY_BUCKETS];
};

/* Offset of backend_fd (the epoll fd) in libuv's uv_loop_t on 64-bit targets. The public
 * fields before it (data, active_handles, handle_queue, active_reqs, internal_fields or the
 * older unused[2], stop_flag) and the first private one (flags) are part of libuv 1.x's
 * stable ABI, so the offset is the same in every libuv 1.x, hence in Node.js 12 and later. */
#define SONDE_UV_LOOP_BACKEND_FD_OFFSET 64

/* Processes tracked at once; LRU, so a full map evicts the stalest entry, never refuses. */
#define SONDE_NODEJS_MAX_PROCESSES 16384

#endif
