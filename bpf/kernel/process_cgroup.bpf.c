// SPDX-License-Identifier: GPL-2.0
/* The cgroup of one process, as programs filtering on bpf_get_current_cgroup_id() see it (its
 * default-hierarchy cgroup), read by user space through a task iterator opened for that
 * process (Linux 6.1 and later). /proc cannot give this id to an agent in a private cgroup
 * namespace (a pod's): there another pod's cgroup path starts with "/.." and names no directory
 * the agent can see. The start time tells the process from a later one with the same pid.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "process_cgroup.h"

char LICENSE[] SEC("license") = "GPL";

SEC("iter/task")
int process_cgroup(struct bpf_iter__task* ctx) {
  struct task_struct* task = ctx->task;
  if (!task || task->pid != task->tgid) return 0; /* the leader: once per process */
  struct sonde_process_cgroup out = {
      .cgroup_id = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id),
      .start_boottime_ns = task->start_boottime,
  };
  bpf_seq_write(ctx->meta->seq, &out, sizeof out);
  return 0;
}
