/* Process ids as the agent sees them, for every program that reports or keys by pid.
 *
 * The agent names processes by the pids of its /proc. On most nodes that is the initial pid
 * namespace, where bpf_get_current_pid_tgid() answers. On kind, k3d or sysbox nodes the agent
 * runs in a pid namespace of its own (the "node" container's), and the kernel's pids are
 * other numbers: user space sets pidns_dev/pidns_ino (the nsfs identity of that namespace)
 * before load, and the programs translate. bpf_get_ns_current_pid_tgid() answers only for a
 * task whose own namespace is exactly the agent's; a pod's process on such a node lives in a
 * namespace below it, so its number is read from its struct pid at the agent's level.
 * Translating costs a helper call, or a few reads for a task of a deeper namespace; a task the
 * agent cannot see (outside its namespace) reads as pid 0, which no program keys by.
 */
#ifndef SONDE_BPF_PIDNS_BPF_H
#define SONDE_BPF_PIDNS_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/* The agent's pid namespace; pidns_ino 0: the initial one (no translation). Set before load. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;

/* The kernel's MAX_PID_NS_LEVEL: a struct pid has at most this many levels. */
#define SONDE_PIDNS_MAX_LEVEL 32

/* The number of `pid` in the agent's namespace, 0 when it has none there. */
static __always_inline __u32 pid_nr_in_agent_ns(struct pid* pid) {
  unsigned int level = BPF_CORE_READ(pid, level);
  /* bounded by the kernel's nesting limit; ends at the first level deeper than the pid's */
  for (__u32 i = 0; i < SONDE_PIDNS_MAX_LEVEL; i++) {
    if (i > level) break;
    if (BPF_CORE_READ(pid, numbers[i].ns, ns.inum) == pidns_ino) {
      return BPF_CORE_READ(pid, numbers[i].nr);
    }
  }
  return 0;
}

/* The process id (tgid) of `task` as the agent sees it. */
static __always_inline __u32 task_tgid_for_agent(struct task_struct* task) {
  if (!pidns_ino) return BPF_CORE_READ(task, tgid);
  return pid_nr_in_agent_ns(BPF_CORE_READ(task, group_leader, thread_pid));
}

/* The current task's process id (tgid) as the agent sees it. */
static __always_inline __u32 current_tgid_for_agent(void) {
  if (!pidns_ino) return bpf_get_current_pid_tgid() >> 32;
  struct bpf_pidns_info ns;
  if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof ns) == 0) return ns.tgid;
  return task_tgid_for_agent((struct task_struct*)bpf_get_current_task());
}

/* Whether the current task is its process's main thread (in every namespace alike). */
static __always_inline bool current_is_main_thread(void) {
  __u64 id = bpf_get_current_pid_tgid();
  return (__u32)id == (__u32)(id >> 32);
}

#endif
