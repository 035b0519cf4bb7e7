/* Process exec/exit events, shared by bpf/procevents/procevents.bpf.c and the agent (C only). */
#ifndef SONDE_BPF_PROCEVENTS_H
#define SONDE_BPF_PROCEVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SONDE_COMM_LEN 16
#define SONDE_FILENAME_LEN 256

enum sonde_proc_event_kind {
  SONDE_PROC_EXEC = 1,
  SONDE_PROC_EXIT = 2,
};

struct sonde_proc_event {
  __u64 timestamp_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
  __u64 cgroup_id;    /* cgroup v2 id of the process (0 on a v1-only host) */
  __u32 kind;         /* enum sonde_proc_event_kind */
  __u32 pid;          /* thread-group id, what user space calls the pid */
  __u32 ppid;
  __u32 exit_code; /* wait(2)-style status, SONDE_PROC_EXIT only */
  char comm[SONDE_COMM_LEN];
  char filename[SONDE_FILENAME_LEN]; /* path given to execve, SONDE_PROC_EXEC only */
};

#endif
