#include "agent/symbols/tenant_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

namespace sonde::symbols {
namespace {

// The next space-separated field of `line`, consumed.
std::string_view next_field(std::string_view& line) {
  size_t start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  size_t end = line.find(' ');
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

bool parse_number(std::string_view text, uint64_t& out, int base) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

// The kernel refuses what cannot be an executable or a library anyway: only regular files.
Status check_regular(int fd, const std::string& what, struct stat& st) {
  if (::fstat(fd, &st) != 0) return errno_error("fstat " + what, errno);
  if (!S_ISREG(st.st_mode)) return Error(what + " is not a regular file", EINVAL);
  return ok_status();
}

}  // namespace

std::optional<MappedFileRef> parse_mapped_file(std::string_view line) {
  MappedFileRef m;
  std::string_view range = next_field(line);
  size_t dash = range.find('-');
  if (dash == std::string_view::npos || !parse_number(range.substr(0, dash), m.start, 16) ||
      !parse_number(range.substr(dash + 1), m.end, 16) || m.end <= m.start) {
    return std::nullopt;
  }
  next_field(line);  // perms
  next_field(line);  // offset
  std::string_view dev = next_field(line);
  size_t colon = dev.find(':');
  uint64_t major = 0, minor = 0;
  if (colon == std::string_view::npos || !parse_number(dev.substr(0, colon), major, 16) ||
      !parse_number(dev.substr(colon + 1), minor, 16) ||
      !parse_number(next_field(line), m.inode, 10)) {
    return std::nullopt;
  }
  m.dev = makedev(major, minor);
  size_t path = line.find_first_not_of(' ');
  if (m.inode == 0 || path == std::string_view::npos || line[path] != '/') return std::nullopt;
  m.path = std::string(line.substr(path));
  return m;
}

Result<UniqueFd> open_in_root(const std::string& proc_root, pid_t pid, const std::string& path) {
  const std::string root = proc_root + "/" + std::to_string(pid) + "/root";
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return errno_error("open " + root, errno);
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string what = path + " in the root of pid " + std::to_string(pid);
  UniqueFd fd(
      static_cast<int>(::syscall(SYS_openat2, root_fd.get(), path.c_str(), &how, sizeof how)));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOSYS) {
      return Error("open " + what +
                       ": openat2 is not in this kernel (Linux 5.6+): a path in a "
                       "process's namespace cannot be opened safely",
                   err);
    }
    return errno_error("open " + what, err);
  }
  struct stat st {};
  RETURN_IF_ERROR(check_regular(fd.get(), what, st));
  return fd;
}

Result<UniqueFd> open_mapped_file(const std::string& proc_root, pid_t pid, const MappedFileRef& m,
                                  bool use_map_files) {
  if (use_map_files) {
    char range[64];
    (void)std::snprintf(range, sizeof range, "/%llx-%llx", static_cast<unsigned long long>(m.start),
                        static_cast<unsigned long long>(m.end));
    const std::string path = proc_root + "/" + std::to_string(pid) + "/map_files" + range;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (fd.valid()) {
      struct stat st {};
      RETURN_IF_ERROR(check_regular(fd.get(), path, st));
      return fd;
    }
    // Refused, or no such mapping any more: the path, checked against the mapping, is as safe.
  }
  ASSIGN_OR_RETURN(UniqueFd fd, open_in_root(proc_root, pid, m.path));
  struct stat st {};
  RETURN_IF_ERROR(check_regular(fd.get(), m.path, st));
  if (st.st_dev != m.dev || st.st_ino != m.inode) {
    return Error(m.path + " in the root of pid " + std::to_string(pid) +
                     " is no longer the file it maps (replaced since)",
                 ESTALE);
  }
  return fd;
}

}  // namespace sonde::symbols
