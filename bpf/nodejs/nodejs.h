/* Node.js event-loop accounting, shared by bpf/nodejs/nodejs.bpf.c and the agent (C only).
 *
 * Blocked time is the wall time the main thread spends outside the epoll waits of its event
 * loop. The kernel side keeps, per tracked process, the sum of finished busy periods and the
 * start of the current one; user space adds the in-progress part at scrape time.
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
};

/* Offset of backend_fd (the epoll fd) in libuv's uv_loop_t on 64-bit targets. The public
 * fields before it (data, active_handles, handle_queue, active_reqs, internal_fields or the
 * older unused[2], stop_flag) and the first private one (flags) are part of libuv 1.x's
 * stable ABI, so the offset is the same in every libuv 1.x, hence in Node.js 12 and later. */
#define SONDE_UV_LOOP_BACKEND_FD_OFFSET 64

/* Processes tracked at once; LRU, so a full map evicts the stalest entry, never refuses. */
#define SONDE_NODEJS_MAX_PROCESSES 16384

#endif
