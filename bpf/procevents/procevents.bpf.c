// SPDX-License-Identifier: GPL-2.0
/* Process exec/exit events for the agent's process discovery.
 *
 * BTF raw tracepoints (tp_btf) are used instead of classic tracepoints: they need no tracefs,
 * which is not mounted on every node.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "dropped.bpf.h"
#include "pidns.bpf.h"
#include "procevents.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* `task`'s pid is the agent's (0 for a task outside its pid namespace: no event). */
static __always_inline struct sonde_proc_event* reserve(struct task_struct* task, __u32 pid,
                                                        __u32 kind) {
  if (!pid) return 0;
  struct sonde_proc_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_drop();
    return 0;
  }
  e->timestamp_ns = bpf_ktime_get_ns();
  e->cgroup_id = bpf_get_current_cgroup_id();
  e->kind = kind;
  e->pid = pid;
  e->ppid = task_tgid_for_agent(BPF_CORE_READ(task, real_parent)); /* 0: outside it */
  e->exit_code = 0;
  bpf_get_current_comm(e->comm, sizeof(e->comm));
  e->filename[0] = 0;
  return e;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  struct sonde_proc_event* e = reserve(p, task_tgid_for_agent(p), SONDE_PROC_EXEC);
  if (!e) return 0;
  const char* filename = BPF_CORE_READ(bprm, filename);
  bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), filename);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

/* Fires once per exiting thread; only the thread-group leader's exit is the process's. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct* p) {
  if (BPF_CORE_READ(p, pid) != BPF_CORE_READ(p, tgid)) return 0;
  struct sonde_proc_event* e = reserve(p, task_tgid_for_agent(p), SONDE_PROC_EXIT);
  if (!e) return 0;
  e->exit_code = BPF_CORE_READ(p, exit_code);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
