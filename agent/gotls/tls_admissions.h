// TlsAdmissions: the processes selected for Go TLS (admit()), each with the container it was
// selected with and its start time, and the kernel's cgroup filter built from them.
//
// An admission is what lets a selected process's counts reach its container even when it exits
// before TlsMonitor::consider() tracks it. With the filter on (filter_by_cgroup()), each admitted
// process's cgroup, named by the kernel (TlsCounters::cgroup_of), is counted by the kernel while
// an admitted process of it lives: one kernel map entry per cgroup, reference-counted by its
// admitted processes. A cgroup the kernel cannot name, or a full cgroup map, turns the filter off
// for good (with a warning) and empties the kernel's cgroup map: every process of an instrumented
// file is counted again, rather than a selected process silently never counted.
//
// Thread-safety: none; TlsMonitor uses it under its mutex. Cost: admit() asks the kernel for the
// process's cgroup (a task-iterator read) when filtering; the rest is map work.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/discovery/proc_reader.h"
#include "agent/gotls/tls_probes.h"
#include "agent/runtime/container_totals.h"

namespace sonde::agent {

class TlsAdmissions {
 public:
  struct Admission {
    uint64_t start_time;
    ContainerLabels labels;
    std::optional<uint64_t> cgroup_id;  // counted by the filter on its behalf
  };

  // `kernel`: whose cgroup filter this drives; it must outlive this.
  explicit TlsAdmissions(TlsCounters& kernel) : kernel_(kernel) {}

  // Turns the kernel's filter on: from now on it counts only admitted processes' cgroups.
  void filter_by_cgroup();
  bool filtering() const { return filtering_; }

  // Admits `process` (one admission per pid: a new process under the pid, a move to another
  // cgroup or new labels replace the old one). A process the kernel says is gone is not
  // admitted.
  void admit(const ProcessInfo& process, const ContainerLabels& labels);
  // pid is no longer selected, and its cgroup no longer counted on its behalf.
  void unadmit(pid_t pid);
  // pid's admission, null when it has none.
  const Admission* find(pid_t pid) const;
  // The admitted pids whose process is gone (exited, or the pid names another process now).
  std::vector<pid_t> vanished(const ProcReader& proc) const {
    return vanished_pids(proc, admitted_);
  }

 private:
  void stop_filtering(const std::string& why);

  TlsCounters& kernel_;
  bool filtering_ = false;
  std::map<pid_t, Admission> admitted_;  // selected processes, tracked or not considered yet
  std::map<uint64_t, size_t> admitted_cgroups_;  // cgroup id → admitted processes in it
};

}  // namespace sonde::agent
