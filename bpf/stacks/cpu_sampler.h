/* CPU sampling, shared by bpf/stacks/cpu_sampler.bpf.c and the agent (C only).
 *
 * A perf event per CPU runs the sampler at a fixed frequency. A sample of a selected process
 * (by cgroup, by pid, or every process) takes its user and kernel stacks into the stack map of
 * the current generation and counts one in `counts` under a sonde_cpu_key. User space drains
 * one generation while the kernel fills the other, so no increment races a delete.
 */
#ifndef SONDE_BPF_CPU_SAMPLER_H
#define SONDE_BPF_CPU_SAMPLER_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Frames kept per stack: the kernel's PERF_MAX_STACK_DEPTH default. */
#define SONDE_CPU_MAX_FRAMES 127
/* Distinct stacks per generation and map (user and kernel maps alike). Each entry costs
 * SONDE_CPU_MAX_FRAMES * 8 bytes preallocated: 4096 entries are 4 MiB per map. */
#define SONDE_CPU_MAX_STACKS 4096
/* Distinct (process, cgroup, stacks) keys over both generations. */
#define SONDE_CPU_MAX_KEYS 16384
/* Selected cgroups and processes. */
#define SONDE_CPU_MAX_SELECTED 16384
/* Node.js processes whose V8 frames are recorded (user space knows their layout). */
#define SONDE_V8_MAX_PROCESSES 4096
/* Frames of the V8 walk: the innermost ones, where the sampled JavaScript function is. Each
 * costs four bounded user reads in the sampler; a walk stops earlier at a null, unreadable or
 * non-increasing frame pointer. */
#define SONDE_V8_MAX_FRAMES 32
/* Distinct V8 stacks per generation; each entry is sizeof(struct sonde_v8_stack), 1032 bytes:
 * the two preallocated maps take about 8.5 MiB. */
#define SONDE_V8_MAX_STACKS 4096

/* Where a V8 frame keeps what names it, in bytes from the frame pointer (v8dbg_off_fp_*), and
 * where a JSFunction keeps its SharedFunctionInfo, in bytes from the tagged pointer. */
struct sonde_v8_process {
  __s32 fp_function;
  __s32 fp_context_or_frame_type;
  __s32 function_shared;
  __s32 pad;
};

/* One frame of the frame-pointer walk: the pc as the user stack has it, and the raw slot
 * values user space checks against the V8 heap before it trusts them. */
struct sonde_v8_frame {
  __u64 pc;
  __u64 function;        /* [fp + fp_function]: a JSFunction in JavaScript frames */
  __u64 context_or_type; /* [fp + fp_context_or_frame_type]: a Smi marks a typed frame */
  __u64 shared; /* [function + function_shared] at the sample: the SharedFunctionInfo then. GC
                 * moves objects before user space reads the heap; it names the frame only if
                 * the function there still points to this one. */
};

struct sonde_v8_stack {
  __u32 frames;
  __u32 pad;
  struct sonde_v8_frame frame[SONDE_V8_MAX_FRAMES];
};

struct sonde_cpu_key {
  __u64 cgroup_id;       /* cgroup v2 id of the sampled task */
  __u32 tgid;            /* process (host pid namespace) */
  __s32 user_stack_id;   /* < 0: no user stack (kernel thread) or lost, see below */
  __s32 kernel_stack_id; /* < 0: the sample was taken in user space, or lost */
  __u8 generation;       /* which stack maps the ids refer to (0 or 1) */
  __u8 blocked;          /* a tracked Node.js main thread whose loop was blocked */
  __u8 pad[2];
  __u64 v8_stack; /* hash of the V8 walk in v8_stacks_<generation>, 0 when none */
};

/* Indexes of the per-CPU `drops` counters. */
enum sonde_cpu_drop {
  SONDE_CPU_DROP_KEY = 0,      /* `counts` was full: the sample is lost */
  SONDE_CPU_DROP_STACK = 1,    /* a stack map was full or collided: the sample lost a stack */
  SONDE_CPU_DROP_V8_STACK = 2, /* a V8 stack map was full: the sample has no V8 frames */
  /* the kernel gave no user stack for a process that has one (it has an mm): the sample is kept
   * without user frames */
  SONDE_CPU_DROP_USER_STACK = 3,
  SONDE_CPU_DROP_COUNT = 4,
};

#endif
