// Vdso: function names for addresses in a process's [vdso] mapping, which no file backs.
//
// The kernel maps one vDSO image per ABI into every process, so the agent reads its own once
// (the mapping /proc/self/maps names [vdso], at getauxval(AT_SYSINFO_EHDR)) and names another
// process's [vdso] addresses with it only after checking that the process's mapping holds the
// same bytes (a 32-bit or x32 process has another image: its frames stay unnamed, never named
// wrongly). Names come from the image's .dynsym; of the aliases at one address (`clock_gettime`,
// a weak alias, and `__vdso_clock_gettime`) the global symbol, the vDSO's own name, wins.
//
// Immutable after own(); lookups allocate nothing. The image is a few KiB (kMaxImageBytes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sonde::agent::stacks {

class Vdso {
 public:
  static constexpr size_t kMaxImageBytes = 1 << 20;

  // The agent's own vDSO; an Error when the process has none or it cannot be parsed.
  static Result<Vdso> own();
  // From an image's bytes (tests; own() reads them from memory).
  static Result<Vdso> from_image(std::vector<uint8_t> image);

  size_t size() const { return image_.size(); }
  // Whether `other` (a process's [vdso] mapping, whole) is this image.
  bool same_image(std::span<const uint8_t> other) const;
  // The function at `offset` from the image's start, nullopt when none covers it.
  std::optional<std::string_view> function_at(uint64_t offset) const;

 private:
  struct Function {
    uint64_t start;  // offset from the image's start
    uint64_t end;
    std::string name;
  };
  std::vector<uint8_t> image_;
  std::vector<Function> functions_;  // sorted by start, one per address
};

}  // namespace sonde::agent::stacks
