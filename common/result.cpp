#include "common/result.h"

#include <cstring>

namespace sonde {

Error errno_error(const std::string& what, int err) {
  return Error(what + ": " + std::strerror(err), err);
}

}  // namespace sonde
