// ProcReader: what the agent reads about a process from /proc, and the container it runs in.
//
// The /proc root is a parameter so tests can use fixture trees and a containerized agent can
// use the host's /proc mounted elsewhere. Every read is a likely failure (the process may
// exit at any moment): errors carry ENOENT/ESRCH so callers can tell "gone" from "denied".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::agent {

struct ProcessInfo {
  pid_t pid = 0;
  uint64_t start_time = 0;  // clock ticks since boot (field 22 of stat): pid + start = identity
  std::string comm;
  std::string exe;           // readlink of /proc/<pid>/exe, in the process's mount namespace
  std::string container_id;  // 64 hex digits, empty when not in a container
  // When its exec was seen (the exec event's CLOCK_MONOTONIC ns); 0 when found by a /proc scan.
  // Not read from /proc: set by whoever saw the exec.
  uint64_t exec_ns = 0;
};

// The syscall a thread is blocked in, from /proc/<pid>/task/<tid>/syscall.
struct BlockedSyscall {
  long nr = -1;  // -1: running (not in a system call)
  uint64_t arg0 = 0;
};

// A mapping of a process's executable.
struct ExeMapping {
  uint64_t base = 0;  // its start address (for position-independent binaries)
  std::string file;   // "<major>:<minor>:<inode>" as the mapping names the file
};

class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}

  const std::string& root() const { return root_; }

  // Every numeric entry of the /proc root.
  std::vector<pid_t> list_pids() const;

  Result<ProcessInfo> read(pid_t pid) const;
  Result<uint64_t> start_time(pid_t pid) const;
  Result<BlockedSyscall> syscall_of(pid_t pid, pid_t tid) const;

  // Path through which the process's executable can be opened from the agent's namespace
  // (/proc/<pid>/exe, valid while the process lives).
  std::string exe_path(pid_t pid) const;

  // The first mapping of the executable, from /proc/<pid>/maps (which names the file without
  // touching it: no I/O on a file that may hang).
  Result<ExeMapping> exe_mapping(pid_t pid) const;
  // Base address of the first mapping of the executable (for position-independent binaries).
  Result<uint64_t> exe_load_base(pid_t pid) const;

 private:
  std::string root_;
};

// Container id from /proc/<pid>/cgroup text: containerd (cri-containerd-<id>.scope or
// .../<id>), CRI-O (crio-<id>.scope), Docker (docker-<id>.scope or /docker/<id>), Podman
// (libpod-<id>.scope), cgroup v1 and v2. Empty when the process is in no container.
std::string container_id_from_cgroup(std::string_view cgroup_text);

// Where the cgroup v2 hierarchy is mounted, from `mounts` text (/proc/self/mounts): the first
// cgroup2 mount ("/sys/fs/cgroup", ".../unified" on hybrid hosts), nullopt when there is none.
std::optional<std::string> cgroup2_mount(std::string_view mounts_text);

// The directory of the cgroup v2 whose id is `cgroup_id` (bpf_get_current_cgroup_id()'s: the
// directory's inode), opened by its file handle below the cgroup2 mount at `cgroup2_root`
// (open_by_handle_at: CAP_DAC_READ_SEARCH), so neither a cgroup namespace nor a path matters. An
// error is_gone() when no such cgroup exists (removed). Costs two opens.
Result<UniqueFd> open_cgroup2_by_id(const std::string& cgroup2_root, uint64_t cgroup_id);

// The path of that cgroup relative to the cgroup2 mount ("/" for the root,
// "/kubepods.slice/..."). Costs open_cgroup2_by_id() and a readlink.
Result<std::string> cgroup2_path_of(const std::string& cgroup2_root, uint64_t cgroup_id);

// start_time from /proc/<pid>/stat text (the comm field may hold spaces and parentheses).
std::optional<uint64_t> parse_stat_start_time(std::string_view stat_text);

// /proc/<pid>/task/<tid>/syscall text: "running", or "<nr> <arg0 hex> ... <sp> <pc>" ("-1 <sp>
// <pc>" when blocked outside a system call). Anything malformed reads as nr -1 (not in a
// system call): the caller's safe answer.
BlockedSyscall parse_syscall(std::string_view syscall_text);

// The first line of /proc/<pid>/maps text that maps exactly `exe` (the path is the line's last
// field), nullopt when none does or the line is malformed.
std::optional<ExeMapping> exe_mapping_from_maps(std::string_view maps_text, std::string_view exe);

// The pids of `processes` (pid → a record with the `start_time` it was seen with) whose process
// is gone: exited, or the pid names another process now. What every monitor's sweep looks for.
template <typename Map>
std::vector<pid_t> vanished_pids(const ProcReader& proc, const Map& processes) {
  std::vector<pid_t> out;
  for (const auto& [pid, p] : processes) {
    auto start = proc.start_time(pid);
    if (!start.ok() || *start != p.start_time) out.push_back(pid);
  }
  return out;
}

}  // namespace sonde::agent
