// SPDX-License-Identifier: GPL-2.0
/* What one uprobe hit costs on this node, by the kind of instruction it replaces: the agent
 * attaches this program to two functions of its own (one starting with a jump the kernel
 * emulates, one with an instruction it single-steps out of line), calls each a known number of
 * times and times the calls (agent/kernel/uprobe_cost.h). The program only counts its hits, so
 * the count proves the probe fired on every call. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

__u64 hits = 0;

SEC("uprobe")
int count_hit(struct pt_regs* ctx) {
  __sync_fetch_and_add(&hits, 1);
  return 0;
}
