// Reading a whole file: configs, kubeconfigs, tokens, /proc and /sys files.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace sonde {

// The bytes of the file at `path`, read to its end (files that report no size, as /proc's do,
// included); more than `max_bytes` is an error, so a file a tenant controls cannot make the
// caller allocate without bound. Errors say "read <path>: <reason>" with the errno of the
// failure (ENOENT, EACCES, ESRCH for a process that is gone, EFBIG past max_bytes).
Result<std::string> read_file(const std::string& path, size_t max_bytes = 64u << 20);

}  // namespace sonde
