// libFuzzer target for identify(): the fuzz bytes become a file (a memfd) and are identified
// the way the agent identifies every binary it meets — header read, program header table,
// note segments by pread. Any crash, sanitizer report, hang or large allocation is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "agent/symbols/binary_identity.h"
#include "common/unique_fd.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sonde::UniqueFd fd(::memfd_create("identity-fuzz", MFD_CLOEXEC));
  if (!fd.valid()) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd.get(), data + done, size - done);
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  auto id = sonde::symbols::identify(fd.get(), "fuzz input");
  if (id.ok()) (void)id->to_string();
  return 0;
}
