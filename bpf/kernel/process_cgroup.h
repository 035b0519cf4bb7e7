/* Shared by bpf/kernel/process_cgroup.bpf.c and agent/kernel/process_cgroups.cpp (C only). */
#ifndef SONDE_BPF_PROCESS_CGROUP_H
#define SONDE_BPF_PROCESS_CGROUP_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* What the iterator writes for a process. */
struct sonde_process_cgroup {
  __u64 cgroup_id;         /* bpf_get_current_cgroup_id() in the process */
  __u64 start_boottime_ns; /* /proc/<pid>/stat's start time, in ns */
};

#endif
