// libFuzzer target: arbitrary bytes as an executable to symbolize — the ELF symbol table and
// the Go pclntab found by section, symbol or magic scan, module data included. Opening may
// fail; nothing may read out of bounds, hang or allocate out of proportion to the input.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "agent/symbolize/elf_symbolizer.h"
#include "agent/symbolize/go_binary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  if (auto elf = sonde::symbolize::ElfSymbolizer::from_bytes(bytes); elf.ok()) {
    for (uint64_t a = 0; a < 0x2000; a += 0x41) (void)(*elf)->lookup(0x400000 + a);
    (void)(*elf)->lookup(UINT64_MAX);
  }
  if (auto go = sonde::symbolize::GoBinary::from_bytes(bytes); go.ok()) {
    const auto& t = (*go)->pclntab();
    std::array<sonde::symbolize::GoFrame, 8> frames;
    uint64_t step = (t.max_pc() - t.min_pc()) / 32 + 1;
    for (uint64_t pc = t.min_pc(); pc < t.max_pc(); pc += step) {
      (void)t.lookup_frames(pc, frames);
      if (pc + step < pc) break;
    }
  }
  return 0;
}
