// ProcessCgroups: the cgroup (v2 id) of a process, read from the kernel
// (bpf/kernel/process_cgroup.bpf.c): the id that BPF programs filtering on
// bpf_get_current_cgroup_id() see in its threads (the Go TLS cgroup filter, the CPU sampler's
// cgroup selection). Right in any cgroup namespace, where /proc/<pid>/cgroup is not (a pod's agent
// reads other pods' cgroups as "/../..").
//
// Cost: one task iterator per call (5 syscalls, ~40 us measured with strace -T). Needs Linux 6.1
// or later (task iterators for one process); earlier kernels answer an error (EINVAL).
// Thread-safe: cgroup_of() touches nothing shared.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "common/result.h"

struct process_cgroup_bpf;

namespace sonde::agent {

class ProcessCgroups {
 public:
  static Result<std::unique_ptr<ProcessCgroups>> load();
  ~ProcessCgroups();
  ProcessCgroups(const ProcessCgroups&) = delete;
  ProcessCgroups& operator=(const ProcessCgroups&) = delete;

  // The cgroup of process `pid` (the agent's pid namespace), which started at `start_time`
  // (clock ticks since boot, as /proc/<pid>/stat says). An error is_gone() (ESRCH) when no
  // such process exists: gone, or a later process under the pid.
  Result<uint64_t> cgroup_of(pid_t pid, uint64_t start_time) const;

 private:
  ProcessCgroups() = default;
  std::unique_ptr<process_cgroup_bpf, void (*)(process_cgroup_bpf*)> skel_{nullptr, nullptr};
};

}  // namespace sonde::agent
