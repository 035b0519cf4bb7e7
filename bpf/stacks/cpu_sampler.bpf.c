// SPDX-License-Identifier: GPL-2.0
/* CPU sampling of selected processes (see cpu_sampler.h for the data layout).
 *
 * Runs on every CPU at the perf event's frequency, for whatever task is on the CPU. Idle time
 * (pid 0) and unselected tasks leave after one map lookup; selected ones cost two stack walks
 * (frame pointers; the kernel's own unwinder for kernel stacks) and one hash update.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "cpu_sampler.h"
#include "nodejs/nodejs.h"
#include "pidns.bpf.h"
#include "stacks/sample.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set before load. */
const volatile bool all_processes = false; /* sample every process, ignore the selections */
const volatile bool track_loops = false;   /* `loops` is the Node.js probes' map (fd reuse) */

/* Written by user space while running. */
volatile __u8 generation = 0;      /* the generation new samples go to */
volatile bool select_pids = false; /* some pids are selected: look in selected_pids too */

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_CPU_MAX_SELECTED);
  __type(key, __u64);
  __type(value, __u8);
} selected_cgroups SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_CPU_MAX_SELECTED);
  __type(key, __u32);
  __type(value, __u8);
} selected_pids SEC(".maps");

/* The Node.js event-loop state (bpf/nodejs/nodejs.bpf.c). User space makes this the very map of the
 * loaded Node.js probes with bpf_map__reuse_fd(), or shrinks it to one entry when unused. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_NODEJS_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_loop_state);
} loops SEC(".maps");

SONDE_STACK_TRACE_MAP(user_stacks_0, SONDE_CPU_MAX_STACKS);
SONDE_STACK_TRACE_MAP(user_stacks_1, SONDE_CPU_MAX_STACKS);
SONDE_STACK_TRACE_MAP(kernel_stacks_0, SONDE_CPU_MAX_STACKS);
SONDE_STACK_TRACE_MAP(kernel_stacks_1, SONDE_CPU_MAX_STACKS);

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_CPU_MAX_KEYS);
  __type(key, struct sonde_cpu_key);
  __type(value, __u64);
} counts SEC(".maps");

/* Node.js processes whose V8 frames to record, with their frame layout (set by user space). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_V8_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_v8_process);
} v8_processes SEC(".maps");

SONDE_V8_STACK_MAP(v8_stacks_0, SONDE_V8_MAX_STACKS);
SONDE_V8_STACK_MAP(v8_stacks_1, SONDE_V8_MAX_STACKS);
SONDE_V8_SCRATCH_MAP(v8_scratch);

SONDE_SAMPLE_DROPS(drops, SONDE_CPU_DROP_COUNT);

/* A stack id, or -1 when there is none. -EFAULT means "no stack of this kind": normal for the
 * kernel stack of a sample taken in user mode and the user stack of a kernel thread (or of a
 * task past exit_mm), counted for the user stack of a task that still has its memory. */
static __always_inline __s32 stack_id(void* ctx, void* map, __u64 flags) {
  long id = bpf_get_stackid(ctx, map, flags);
  if (id >= 0) return (__s32)id;
  if (id != -14 /* EFAULT */) {
    count_drop(SONDE_CPU_DROP_STACK);
  } else if ((flags & BPF_F_USER_STACK) &&
             BPF_CORE_READ((struct task_struct*)bpf_get_current_task(), mm)) {
    count_drop(SONDE_CPU_DROP_USER_STACK);
  }
  return -1;
}

/* The V8 walk of a Node.js process (sample.bpf.h), stored under its hash in the generation's
 * map; returns the hash, 0 when nothing was stored. */
static __always_inline __u64 record_v8_stack(struct bpf_perf_event_data* ctx, __u32 tgid,
                                             __u8 gen) {
  struct sonde_v8_process* proc = bpf_map_lookup_elem(&v8_processes, &tgid);
  if (!proc) return 0;
  int dropped = 0;
  __u64 hash = record_v8_walk(ctx, proc, &v8_scratch,
                              gen ? (void*)&v8_stacks_1 : (void*)&v8_stacks_0, &dropped);
  if (dropped) count_drop(SONDE_CPU_DROP_V8_STACK);
  return hash;
}

SEC("perf_event")
int sample(struct bpf_perf_event_data* ctx) {
  if ((bpf_get_current_pid_tgid() >> 32) == 0) return 0; /* idle */
  __u32 tgid = current_tgid_for_agent();
  if (tgid == 0) return 0; /* outside the agent's pid namespace: it cannot name the process */
  __u64 cgroup = bpf_get_current_cgroup_id();
  if (!all_processes && !bpf_map_lookup_elem(&selected_cgroups, &cgroup) &&
      !(select_pids && bpf_map_lookup_elem(&selected_pids, &tgid))) {
    return 0;
  }

  struct sonde_cpu_key key;
  __builtin_memset(&key, 0, sizeof key);
  key.cgroup_id = cgroup;
  key.tgid = tgid;
  key.generation = generation & 1;
  if (key.generation) {
    key.user_stack_id = stack_id(ctx, &user_stacks_1, BPF_F_USER_STACK);
    key.kernel_stack_id = stack_id(ctx, &kernel_stacks_1, 0);
  } else {
    key.user_stack_id = stack_id(ctx, &user_stacks_0, BPF_F_USER_STACK);
    key.kernel_stack_id = stack_id(ctx, &kernel_stacks_0, 0);
  }
  key.v8_stack = record_v8_stack(ctx, tgid, key.generation);
  if (track_loops && current_is_main_thread()) {
    struct sonde_loop_state* loop = bpf_map_lookup_elem(&loops, &tgid);
    if (loop && loop->phase == SONDE_LOOP_BUSY) key.blocked = 1;
  }

  if (count_sample(&counts, &key) != 0) count_drop(SONDE_CPU_DROP_KEY);
  return 0;
}
