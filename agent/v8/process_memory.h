// Memory of another process, read from the outside: the one seam between the V8 readers
// (v8_layout.h, v8_heap.h) and the kernel, so tests and fuzzers can hand them plain bytes.
//
// A read either fills the whole buffer or fails; it never blocks on the target (the kernel
// copies from its pages: process_vm_readv, root or CAP_SYS_PTRACE), and a target that unmaps
// or rewrites its memory meanwhile gives a failed read or other bytes, never a crash here.
// Every caller bounds the size it asks for; this interface adds no limit of its own.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <span>

namespace sonde::agent::v8 {

class Memory {
 public:
  virtual ~Memory() = default;
  // Copies [address, address + out.size()) into out; false when any byte is unreadable.
  virtual bool read(uint64_t address, std::span<uint8_t> out) const = 0;

  // A little-endian value of type T at address, or false.
  template <typename T>
  bool read_value(uint64_t address, T& value) const {
    uint8_t bytes[sizeof(T)];
    if (!read(address, bytes)) return false;
    std::memcpy(&value, bytes, sizeof(T));
    return true;
  }
};

// A live process's memory through process_vm_readv. Counts the system calls it made (the
// per-sample read budget of the heap reader is checked against it in tests).
class ProcessMemory final : public Memory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  bool read(uint64_t address, std::span<uint8_t> out) const override;
  uint64_t reads() const { return reads_; }

 private:
  pid_t pid_;
  mutable uint64_t reads_ = 0;
};

}  // namespace sonde::agent::v8
