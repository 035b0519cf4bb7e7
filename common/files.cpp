#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace sonde {

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error("read " + path, errno);
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("read " + path, errno);
    }
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return Error("read " + path + ": larger than " + std::to_string(max_bytes) + " bytes", EFBIG);
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace sonde
