#include "agent/discovery/proc_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/files.h"
#include "common/text.h"

namespace sonde::agent {
namespace {

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// One path segment: "cri-containerd-<id>.scope", "crio-<id>.scope", "docker-<id>.scope",
// "libpod-<id>.scope" or a bare "<id>" (cgroupfs driver).
std::string id_from_segment(std::string_view seg) {
  if (seg.ends_with(".scope")) seg.remove_suffix(6);
  auto dash = seg.rfind('-');
  if (dash != std::string_view::npos) seg.remove_prefix(dash + 1);
  return is_hex64(seg) ? std::string(seg) : std::string();
}

}  // namespace

std::string container_id_from_cgroup(std::string_view text) {
  // Lines are "hierarchy:controllers:path"; the innermost segment naming a container wins.
  while (!text.empty()) {
    auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    auto second_colon = line.find(':', line.find(':') + 1);
    if (second_colon == std::string_view::npos) continue;
    std::string_view path = line.substr(second_colon + 1);
    std::string found;
    while (!path.empty()) {
      auto slash = path.find('/');
      std::string_view seg = path.substr(0, slash);
      path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
      if (auto id = id_from_segment(seg); !id.empty()) found = id;
    }
    if (!found.empty()) return found;
  }
  return {};
}

std::optional<std::string> cgroup2_mount(std::string_view text) {
  while (!text.empty()) {
    auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    // "device mountpoint type options dump pass"; a mount point with a space is octal-escaped.
    auto first = line.find(' ');
    if (first == std::string_view::npos) continue;
    auto second = line.find(' ', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view dir = line.substr(first + 1, second - first - 1);
    if (line.substr(second + 1).starts_with("cgroup2 ") && !dir.empty()) return std::string(dir);
  }
  return std::nullopt;
}

Result<UniqueFd> open_cgroup2_by_id(const std::string& cgroup2_root, uint64_t cgroup_id) {
  // kernfs file handles (FILEID_KERNFS) are the node's 64-bit id, which for a cgroup is its id.
  constexpr int kFileIdKernfs = 0xfe;
  struct {
    file_handle head;
    uint64_t id;
  } handle{};
  handle.head.handle_bytes = sizeof handle.id;
  handle.head.handle_type = kFileIdKernfs;
  handle.id = cgroup_id;
  const UniqueFd mount(::open(cgroup2_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (mount.get() < 0) return errno_error("open " + cgroup2_root, errno);
  UniqueFd dir(open_by_handle_at(mount.get(), &handle.head, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    const int err = errno == ESTALE ? ENOENT : errno;  // ESTALE: removed
    return errno_error("open cgroup " + std::to_string(cgroup_id) + " below " + cgroup2_root, err);
  }
  return dir;
}

Result<std::string> cgroup2_path_of(const std::string& cgroup2_root, uint64_t cgroup_id) {
  ASSIGN_OR_RETURN(UniqueFd dir, open_cgroup2_by_id(cgroup2_root, cgroup_id));
  char buf[4096];
  const ssize_t n =
      ::readlink(("/proc/self/fd/" + std::to_string(dir.get())).c_str(), buf, sizeof buf);
  if (n < 0) {
    const int err = errno;
    return errno_error("name cgroup " + std::to_string(cgroup_id), err);
  }
  std::string_view path(buf, static_cast<size_t>(n));
  std::string_view root = cgroup2_root;
  while (root.size() > 1 && root.ends_with('/')) root.remove_suffix(1);
  if (!path.starts_with(root) || (path.size() > root.size() && path[root.size()] != '/')) {
    return Error("cgroup " + std::to_string(cgroup_id) + " is at " + std::string(path) +
                 ", outside " + cgroup2_root);
  }
  path.remove_prefix(root.size());
  return path.empty() ? std::string("/") : std::string(path);
}

std::optional<uint64_t> parse_stat_start_time(std::string_view stat) {
  auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After "pid (comm)" come fields 3..; start time is field 22, the 20th after the paren.
  std::string_view rest = stat.substr(close + 1);
  int field = 2;
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = rest.find(' ', pos);
    if (end == std::string_view::npos) end = rest.size();
    if (pos < end && ++field == 22) {
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(rest.data() + pos, rest.data() + end, v);
      if (ec != std::errc() || p != rest.data() + end) return std::nullopt;
      return v;
    }
    pos = end;
  }
  return std::nullopt;
}

namespace {

// The hex number at the start of text ("0x" prefix allowed), nullopt when there is none or it
// does not fit 64 bits.
std::optional<uint64_t> leading_hex(std::string_view text) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

}  // namespace

BlockedSyscall parse_syscall(std::string_view text) {
  BlockedSyscall s;
  if (text.starts_with("running")) return s;
  long nr = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), nr);
  if (ec != std::errc() || nr < 0 || p == text.data() + text.size() || *p != ' ') return s;
  auto arg0 = leading_hex(text.substr(static_cast<size_t>(p - text.data()) + 1));
  if (!arg0) return s;
  s.nr = nr;
  s.arg0 = *arg0;
  return s;
}

std::optional<ExeMapping> exe_mapping_from_maps(std::string_view maps, std::string_view exe) {
  while (!maps.empty()) {
    const size_t eol = maps.find('\n');
    std::string_view line = maps.substr(0, eol);
    maps = eol == std::string_view::npos ? std::string_view() : maps.substr(eol + 1);
    // "start-end perms offset dev inode path"
    if (line.size() <= exe.size() || !line.ends_with(exe) ||
        line[line.size() - exe.size() - 1] != ' ') {
      continue;
    }
    auto base = leading_hex(line);
    if (!base) return std::nullopt;
    // The fourth and fifth fields name the file: "<major>:<minor> <inode>".
    std::string_view rest = line;
    for (int field = 0; field < 3; ++field) {
      auto space = rest.find(' ');
      if (space == std::string_view::npos) return std::nullopt;
      rest.remove_prefix(space + 1);
    }
    auto dev_end = rest.find(' ');
    if (dev_end == std::string_view::npos) return std::nullopt;
    auto inode_end = rest.find(' ', dev_end + 1);
    if (inode_end == std::string_view::npos) return std::nullopt;
    std::string file(rest.substr(0, dev_end));
    file += ':';
    file += rest.substr(dev_end + 1, inode_end - dev_end - 1);
    return ExeMapping{*base, std::move(file)};
  }
  return std::nullopt;
}

std::vector<pid_t> ProcReader::list_pids() const {
  std::vector<pid_t> pids;
  DIR* dir = opendir(root_.c_str());
  if (!dir) return pids;
  while (dirent* e = readdir(dir)) {
    pid_t pid = 0;
    auto [p, ec] = std::from_chars(e->d_name, e->d_name + strlen(e->d_name), pid);
    if (ec == std::errc() && *p == '\0' && pid > 0) pids.push_back(pid);
  }
  closedir(dir);
  return pids;
}

Result<uint64_t> ProcReader::start_time(pid_t pid) const {
  ASSIGN_OR_RETURN(auto stat, read_file(root_ + "/" + std::to_string(pid) + "/stat"));
  auto t = parse_stat_start_time(stat);
  if (!t) return Error("malformed " + root_ + "/" + std::to_string(pid) + "/stat");
  return *t;
}

std::string ProcReader::exe_path(pid_t pid) const {
  return root_ + "/" + std::to_string(pid) + "/exe";
}

Result<ProcessInfo> ProcReader::read(pid_t pid) const {
  ProcessInfo info;
  info.pid = pid;
  std::string dir = root_ + "/" + std::to_string(pid);
  ASSIGN_OR_RETURN(info.start_time, start_time(pid));
  ASSIGN_OR_RETURN(auto comm, read_file(dir + "/comm"));
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  // Names and paths are the tenant's bytes: kept as valid UTF-8 from here on, as they end up
  // in labels, JSON and logs. The executable is opened through /proc/<pid>/exe, not this path.
  info.comm = valid_utf8(comm);
  char buf[4096];
  ssize_t n = ::readlink((dir + "/exe").c_str(), buf, sizeof buf - 1);
  if (n < 0) return errno_error("readlink " + dir + "/exe", errno);
  info.exe = valid_utf8({buf, static_cast<size_t>(n)});
  ASSIGN_OR_RETURN(auto cgroup, read_file(dir + "/cgroup"));
  info.container_id = container_id_from_cgroup(cgroup);
  return info;
}

Result<BlockedSyscall> ProcReader::syscall_of(pid_t pid, pid_t tid) const {
  ASSIGN_OR_RETURN(auto text, read_file(root_ + "/" + std::to_string(pid) + "/task/" +
                                        std::to_string(tid) + "/syscall"));
  return parse_syscall(text);
}

Result<uint64_t> ProcReader::exe_load_base(pid_t pid) const {
  ASSIGN_OR_RETURN(auto mapping, exe_mapping(pid));
  return mapping.base;
}

Result<ExeMapping> ProcReader::exe_mapping(pid_t pid) const {
  std::string dir = root_ + "/" + std::to_string(pid);
  char buf[4096];
  ssize_t n = ::readlink((dir + "/exe").c_str(), buf, sizeof buf - 1);
  if (n < 0) return errno_error("readlink " + dir + "/exe", errno);
  std::string exe(buf, static_cast<size_t>(n));
  ASSIGN_OR_RETURN(auto maps, read_file(dir + "/maps"));
  if (auto mapping = exe_mapping_from_maps(maps, exe)) return *mapping;
  return Error("no mapping of " + exe + " in " + dir + "/maps", ENOENT);
}

}  // namespace sonde::agent
