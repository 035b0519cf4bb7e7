/* What the two perf-event programs that sample stacks (bpf/stacks/cpu_sampler.bpf.c for CPU
 * profiles, bpf/nodejs/nodejs_stalls.bpf.c for stalls) share: their stack maps, the
 * frame-pointer walk of a Node.js process's user stack with each frame's V8 slots, storing a
 * walk under its hash, and counting a sample under its key. Included by BPF sources only; the
 * layout it fills is cpu_sampler.h's sonde_v8_stack.
 */
#ifndef SONDE_BPF_STACKS_SAMPLE_BPF_H
#define SONDE_BPF_STACKS_SAMPLE_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "stacks/cpu_sampler.h"

/* Stacks by id (bpf_get_stackid), `entries` of them, each of up to SONDE_CPU_MAX_FRAMES. */
#define SONDE_STACK_TRACE_MAP(name, entries)                  \
  struct {                                                    \
    __uint(type, BPF_MAP_TYPE_STACK_TRACE);                   \
    __uint(max_entries, entries);                             \
    __uint(key_size, sizeof(__u32));                          \
    __uint(value_size, SONDE_CPU_MAX_FRAMES * sizeof(__u64)); \
  } name SEC(".maps")

/* V8 walks by hash (store_v8_walk), `entries` of them. */
#define SONDE_V8_STACK_MAP(name, entries) \
  struct {                                \
    __uint(type, BPF_MAP_TYPE_HASH);      \
    __uint(max_entries, entries);         \
    __type(key, __u64);                   \
    __type(value, struct sonde_v8_stack); \
  } name SEC(".maps")

/* Where a walk is built (record_v8_walk): a sonde_v8_stack is too large for the BPF stack. */
#define SONDE_V8_SCRATCH_MAP(name)           \
  struct {                                   \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); \
    __uint(max_entries, 1);                  \
    __type(key, __u32);                      \
    __type(value, struct sonde_v8_stack);    \
  } name SEC(".maps")

/* The user registers of the sampled task: the event's own when it interrupted user mode, else
 * the ones saved at the task's entry into the kernel. */
static __always_inline void user_pc_fp(struct bpf_perf_event_data* ctx, __u64* pc, __u64* fp) {
#if defined(__TARGET_ARCH_x86)
  /* volatile: clang would narrow `cs & 3` to a 2-byte load, which the verifier rejects. */
  if ((*(volatile __u64*)&ctx->regs.cs & 3) != 0) {
    *pc = ctx->regs.ip;
    *fp = ctx->regs.bp;
    return;
  }
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(bpf_get_current_task_btf());
  *pc = BPF_CORE_READ(regs, ip);
  *fp = BPF_CORE_READ(regs, bp);
#elif defined(__TARGET_ARCH_arm64)
  if ((*(volatile __u64*)&ctx->regs.pstate & 0xf) == 0) {
    *pc = ctx->regs.pc;
    *fp = ctx->regs.regs[29];
    return;
  }
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(bpf_get_current_task_btf());
  *pc = BPF_CORE_READ(regs, pc);
  *fp = BPF_CORE_READ(regs, regs[29]);
#else
  *pc = 0;
  *fp = 0;
#endif
}

/* Walks the frame-pointer chain as the kernel's user stack walk does (pc, then [fp + 8] per
 * frame), keeping each frame's V8 slots at the offsets `proc` gives, into `st`. Returns the
 * walk's hash (never 0), or 0 when there was no frame. */
static __always_inline __u64 v8_walk(struct bpf_perf_event_data* ctx,
                                     const struct sonde_v8_process* proc,
                                     struct sonde_v8_stack* st) {
  __s64 off_function = proc->fp_function;
  __s64 off_context = proc->fp_context_or_frame_type;
  __s64 off_shared = proc->function_shared;
  __u64 pc = 0;
  __u64 fp = 0;
  user_pc_fp(ctx, &pc, &fp);
  __u64 hash = 0xcbf29ce484222325ULL; /* FNV-1a offset basis, mixed per 8-byte word */
  __u32 n = 0;
  /* Bounded by SONDE_V8_MAX_FRAMES: the verifier sees a constant trip count. */
  for (__u32 i = 0; i < SONDE_V8_MAX_FRAMES; i++) {
    if (pc == 0 || fp == 0) break;
    struct sonde_v8_frame* f = &st->frame[i];
    f->pc = pc;
    f->function = 0;
    f->context_or_type = 0;
    f->shared = 0;
    bpf_probe_read_user(&f->function, sizeof f->function, (void*)(fp + off_function));
    bpf_probe_read_user(&f->context_or_type, sizeof f->context_or_type, (void*)(fp + off_context));
    if (f->function != 0)
      bpf_probe_read_user(&f->shared, sizeof f->shared, (void*)(f->function + off_shared));
    hash = (hash ^ f->pc) * 0x100000001b3ULL;
    hash = (hash ^ f->function) * 0x100000001b3ULL;
    hash = (hash ^ f->context_or_type) * 0x100000001b3ULL;
    hash = (hash ^ f->shared) * 0x100000001b3ULL;
    n = i + 1;
    __u64 next[2];
    if (bpf_probe_read_user(next, sizeof next, (void*)fp) != 0) break;
    if (next[0] <= fp) break; /* stacks grow down: a caller's frame lies above */
    fp = next[0];
    pc = next[1];
  }
  if (n == 0) return 0;
  st->frames = n;
  st->pad = 0;
  hash = (hash ^ n) * 0x100000001b3ULL;
  return hash ? hash : 1;
}

/* Stores walk `st` under `hash` in `map` (a hash map of sonde_v8_stack). Equal hashes are the
 * same walk (64-bit FNV; user space still checks each pc against the user stack), so an entry
 * already there is kept. Returns 0, or -1 when the map has no room (the caller counts a drop). */
static __always_inline int store_v8_walk(void* map, __u64 hash, const struct sonde_v8_stack* st) {
  if (bpf_map_lookup_elem(map, &hash)) return 0;
  long err = bpf_map_update_elem(map, &hash, st, BPF_NOEXIST);
  return err == 0 || err == -17 /* EEXIST */ ? 0 : -1;
}

/* The program's drop counters: a per-CPU array `name` of `kinds` counts, and count_drop(kind). */
#define SONDE_SAMPLE_DROPS(name, kinds)                \
  struct {                                             \
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);           \
    __uint(max_entries, kinds);                        \
    __type(key, __u32);                                \
    __type(value, __u64);                              \
  } name SEC(".maps");                                 \
  static __always_inline void count_drop(__u32 kind) { \
    __u64* n = bpf_map_lookup_elem(&name, &kind);      \
    if (n) *n += 1;                                    \
  }

/* Walks the sampled thread's V8 frames with `slots`, built in `scratch` (a SONDE_V8_SCRATCH_MAP)
 * and stored under its hash in `stacks` (a SONDE_V8_STACK_MAP). Returns the hash, or 0 when there
 * is no walk or, setting *dropped, when `stacks` has no room (the caller counts a drop). */
static __always_inline __u64 record_v8_walk(struct bpf_perf_event_data* ctx,
                                            const struct sonde_v8_process* slots, void* scratch,
                                            void* stacks, int* dropped) {
  __u32 zero = 0;
  struct sonde_v8_stack* st = bpf_map_lookup_elem(scratch, &zero);
  if (!st) return 0;
  __u64 hash = v8_walk(ctx, slots, st);
  if (hash == 0) return 0;
  if (store_v8_walk(stacks, hash, st) == 0) return hash;
  *dropped = 1;
  return 0;
}

/* Adds one to the __u64 count under `key` in `map`, inserting it at 1. Another CPU may insert
 * the same key between the lookup and the insert (BPF_NOEXIST fails): then its entry is counted.
 * Returns 0, or -1 when the map has no room (the caller counts a drop). */
static __always_inline int count_sample(void* map, const void* key) {
  __u64* n = bpf_map_lookup_elem(map, key);
  if (n) {
    __sync_fetch_and_add(n, 1);
    return 0;
  }
  __u64 one = 1;
  if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) == 0) return 0;
  n = bpf_map_lookup_elem(map, key);
  if (!n) return -1;
  __sync_fetch_and_add(n, 1);
  return 0;
}

#endif
