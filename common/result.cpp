#include "common/result.h"

#include <cstring>

namespace sonde {

std::string errno_text(int err) {
  char buf[128];
  // The GNU strerror_r: returns either buf or a static string.
  return strerror_r(err, buf, sizeof buf);
}

Error errno_error(const std::string& what, int err) {
  return Error(what + ": " + errno_text(err), err);
}

}  // namespace sonde
