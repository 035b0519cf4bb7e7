#include "agent/kernel/process_cgroups.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "bpf/kernel/process_cgroup.h"
#include "process_cgroup.skel.h"

namespace sonde::agent {

Result<std::unique_ptr<ProcessCgroups>> ProcessCgroups::load() {
  std::unique_ptr<ProcessCgroups> self(new ProcessCgroups());
  self->skel_ = {process_cgroup_bpf__open_and_load(), process_cgroup_bpf__destroy};
  if (!self->skel_) {
    return errno_error("process cgroups: load the task iterator (run 'sonde-agent doctor')", errno);
  }
  return self;
}

ProcessCgroups::~ProcessCgroups() = default;

Result<uint64_t> ProcessCgroups::cgroup_of(pid_t pid, uint64_t start_time) const {
  const std::string what = "cgroup of process " + std::to_string(pid);
  bpf_iter_link_info info{};
  info.task.pid = static_cast<uint32_t>(pid);
  LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof info);
  bpf_link* raw = bpf_program__attach_iter(skel_->progs.process_cgroup, &opts);
  if (raw == nullptr) return errno_error(what + ": open a task iterator", errno);
  const BpfLink link(raw);
  const int fd = bpf_iter_create(bpf_link__fd(raw));
  if (fd < 0) return errno_error(what + ": start the task iterator", errno);
  sonde_process_cgroup out{};
  const ssize_t n = read(fd, &out, sizeof out);
  const int read_errno = errno;
  close(fd);
  if (n < 0) return errno_error(what + ": read the task iterator", read_errno);
  // /proc's start time is the kernel's in ns divided down to clock ticks (nsec_to_clock_t).
  const auto ns_per_tick = static_cast<uint64_t>(1'000'000'000 / sysconf(_SC_CLK_TCK));
  if (n != sizeof out || out.start_boottime_ns / ns_per_tick != start_time) {
    return Error(what + ": no such process", ESRCH);
  }
  return out.cgroup_id;
}

}  // namespace sonde::agent
