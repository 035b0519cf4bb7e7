/* Included by BPF programs only: a per-CPU count of ring-buffer records lost because the
 * buffer was full. User space sums it (sum_percpu_counter(map, 0)) and exports it. */
#ifndef SONDE_BPF_DROPPED_BPF_H
#define SONDE_BPF_DROPPED_BPF_H

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

static __always_inline void count_drop(void) {
  __u32 key = 0;
  __u64* n = bpf_map_lookup_elem(&dropped, &key);
  if (n) *n += 1;
}

#endif
