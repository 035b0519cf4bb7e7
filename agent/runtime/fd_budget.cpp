#include "agent/runtime/fd_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <cerrno>

namespace sonde::agent {

Result<FdLimits> raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return errno_error("getrlimit(RLIMIT_NOFILE)", errno);
  FdLimits out{limit.rlim_cur, limit.rlim_cur, limit.rlim_max};
  if (limit.rlim_cur == limit.rlim_max) return out;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return errno_error(
        "raise the soft RLIMIT_NOFILE to the hard limit " + std::to_string(limit.rlim_max), errno);
  }
  out.soft = limit.rlim_cur;
  return out;
}

Result<size_t> ProcessDescriptors::open() const {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return errno_error("count open descriptors: open /proc/self/fd", errno);
  size_t n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n > 0 ? n - 1 : 0;  // the directory's own descriptor
}

uint64_t ProcessDescriptors::soft_limit() const {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return limit.rlim_cur;
}

}  // namespace sonde::agent
