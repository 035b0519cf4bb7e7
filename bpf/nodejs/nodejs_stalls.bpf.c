// SPDX-License-Identifier: GPL-2.0
/* The stall sampler: what a Node.js main thread runs while its loop is busy (nodejs_stalls.h).
 *
 * A perf event per CPU at SONDE_STALL_SAMPLE_HZ runs `stall_sample` for whatever task is on the
 * CPU. It returns at once unless that task is the main thread of a process watched for stalls
 * (one hash lookup) whose loop is busy (one more); only then does it take the user stack and
 * the V8 walk, counted under the turn (busy_since_ns). So the node's CPU profiles keep their
 * frequency, and a busy loop of a watched process is sampled about ten times as often.
 * Generations as in cpu_sampler.bpf.c: user space drains one while the kernel fills the other.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "stacks/cpu_sampler.h"
#include "nodejs.h"
#include "nodejs_stalls.h"
#include "pidns.bpf.h"
#include "stacks/sample.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Written by user space while running: the generation new samples go to. */
volatile __u8 generation = 0;

/* The Node.js probes' loop state (bpf/nodejs/nodejs.bpf.c), made the same map with
 * bpf_map__reuse_fd(). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_NODEJS_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_loop_state);
} loops SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_STALL_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_stall_process);
} stall_processes SEC(".maps");

SONDE_STACK_TRACE_MAP(stall_stacks_0, SONDE_STALL_MAX_STACKS);
SONDE_STACK_TRACE_MAP(stall_stacks_1, SONDE_STALL_MAX_STACKS);
SONDE_V8_STACK_MAP(stall_v8_0, SONDE_STALL_MAX_V8_STACKS);
SONDE_V8_STACK_MAP(stall_v8_1, SONDE_STALL_MAX_V8_STACKS);

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_STALL_MAX_KEYS);
  __type(key, struct sonde_stall_key);
  __type(value, __u64);
} stall_counts SEC(".maps");

SONDE_V8_SCRATCH_MAP(stall_scratch);

SONDE_SAMPLE_DROPS(stall_drops, SONDE_STALL_DROP_COUNT);

static __always_inline __u64 record_v8(struct bpf_perf_event_data* ctx,
                                       const struct sonde_stall_process* proc, __u8 gen) {
  if (!proc->v8) return 0;
  struct sonde_v8_process slots = {proc->fp_function, proc->fp_context_or_frame_type,
                                   proc->function_shared, 0};
  int dropped = 0;
  __u64 hash = record_v8_walk(ctx, &slots, &stall_scratch,
                              gen ? (void*)&stall_v8_1 : (void*)&stall_v8_0, &dropped);
  if (dropped) count_drop(SONDE_STALL_DROP_V8_STACK);
  return hash;
}

SEC("perf_event")
int stall_sample(struct bpf_perf_event_data* ctx) {
  if (!current_is_main_thread()) return 0;
  __u32 tgid = current_tgid_for_agent();
  if (tgid == 0) return 0; /* idle, or outside the agent's pid namespace */
  struct sonde_stall_process* proc = bpf_map_lookup_elem(&stall_processes, &tgid);
  if (!proc) return 0;
  struct sonde_loop_state* loop = bpf_map_lookup_elem(&loops, &tgid);
  if (!loop || loop->phase != SONDE_LOOP_BUSY) return 0;

  struct sonde_stall_key key;
  __builtin_memset(&key, 0, sizeof key);
  key.tgid = tgid;
  key.turn_ns = loop->busy_since_ns;
  key.generation = generation & 1;
  long id = bpf_get_stackid(ctx, key.generation ? (void*)&stall_stacks_1 : (void*)&stall_stacks_0,
                            BPF_F_USER_STACK);
  if (id < 0) {
    if (id != -14 /* EFAULT: no user stack */) count_drop(SONDE_STALL_DROP_STACK);
    key.user_stack_id = -1;
  } else {
    key.user_stack_id = (__s32)id;
  }
  key.v8_stack = record_v8(ctx, proc, key.generation);

  if (count_sample(&stall_counts, &key) != 0) count_drop(SONDE_STALL_DROP_KEY);
  return 0;
}
