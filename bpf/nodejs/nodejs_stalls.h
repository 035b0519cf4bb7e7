/* Long event-loop turns of Node.js processes ("stalls"), shared by bpf/nodejs/nodejs.bpf.c (which
 * reports the end of a long turn), bpf/nodejs/nodejs_stalls.bpf.c (the stall sampler) and the agent
 * (C only).
 *
 * A turn is one busy period of a tracked loop (nodejs.h): it starts when the main thread leaves
 * the loop's epoll wait (sonde_loop_state.busy_since_ns, which names the turn) and ends at the
 * next wait. For a process in `stall_thresholds` (tgid -> threshold in ns), the end of a turn
 * at least that long is one sonde_stall_event in the `stall_events` ring buffer. The stall
 * sampler, a second perf-event program at SONDE_STALL_SAMPLE_HZ, records the user stack and the
 * V8 walk of such a process's main thread only while its loop is busy, counted per turn; user
 * space keeps a turn's samples when its end event comes and drops them otherwise.
 */
#ifndef SONDE_BPF_NODEJS_STALLS_H
#define SONDE_BPF_NODEJS_STALLS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Samples per second per CPU of the stall sampler; each is a tracked main thread's only while
 * its loop is busy: a 200 ms turn gets about 40 (>= 10 even when the thread has half a CPU). */
#define SONDE_STALL_SAMPLE_HZ 199
/* Processes watched for stalls at once (LRU: the stalest is evicted, never a new one refused). */
#define SONDE_STALL_MAX_PROCESSES 4096
/* Distinct (process, turn, stacks) keys per generation; 40 bytes each. */
#define SONDE_STALL_MAX_KEYS 8192
/* Distinct user stacks per generation: 127 * 8 bytes each, 1 MiB per map. */
#define SONDE_STALL_MAX_STACKS 1024
/* Distinct V8 walks per generation: sizeof(struct sonde_v8_stack) (1032 bytes) each. */
#define SONDE_STALL_MAX_V8_STACKS 1024
/* Bytes of the end-of-turn ring buffer: 24-byte records (+8 header), ~8000 of them. */
#define SONDE_STALL_EVENTS_BYTES (256 * 1024)

/* The end of a turn at least its process's threshold long. */
struct sonde_stall_event {
  __u32 tgid;
  __u32 exited;      /* the main thread exited during the turn (the turn ends there) */
  __u64 start_ns;    /* bpf_ktime_get_ns() at the turn's start: busy_since_ns */
  __u64 duration_ns; /* exact */
};

/* A watched process: where its V8 frames keep their slots (sonde_v8_process in cpu_sampler.h;
 * v8 = 0 when its binary publishes no usable V8 layout: user stacks only). */
struct sonde_stall_process {
  __s32 fp_function;
  __s32 fp_context_or_frame_type;
  __s32 function_shared;
  __u32 v8;
};

struct sonde_stall_key {
  __u32 tgid;
  __s32 user_stack_id; /* < 0: lost */
  __u64 turn_ns;       /* the turn's busy_since_ns */
  __u64 v8_stack;      /* hash of the V8 walk, 0 when none */
  __u8 generation;
  __u8 pad[7];
};

enum sonde_stall_drop {
  SONDE_STALL_DROP_KEY = 0,      /* the count map was full: the sample is lost */
  SONDE_STALL_DROP_STACK = 1,    /* the user stack map was full: the sample has no stack */
  SONDE_STALL_DROP_V8_STACK = 2, /* the V8 stack map was full: the sample has no V8 frames */
  SONDE_STALL_DROP_EVENT = 3,    /* the ring buffer was full: a stall's end went unreported */
  SONDE_STALL_DROP_COUNT = 4,
};

#endif
