#include "agent/v8/process_memory.h"

#include <sys/uio.h>

namespace sonde::agent::v8 {

bool ProcessMemory::read(uint64_t address, std::span<uint8_t> out) const {
  if (out.empty()) return true;
  ++reads_;
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(address), out.size()};  // NOLINT(performance-no-int-to-ptr)
  return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(out.size());
}

}  // namespace sonde::agent::v8
