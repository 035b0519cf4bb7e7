// libFuzzer target: arbitrary bytes as a .gopclntab (and as the memory its inline trees and
// module data are read from). Parsing may fail; nothing may read out of bounds or hang.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "agent/symbolize/go_pclntab.h"

using sonde::symbolize::GoFrame;
using sonde::symbolize::GoPclntab;
using sonde::symbolize::GoPclntabOptions;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  (void)sonde::symbolize::find_pclntab_by_magic(bytes.first(std::min<size_t>(size, 4096)));
  (void)sonde::symbolize::find_go_moduledata(bytes, 0x1000, {bytes, 0x1000});

  GoPclntabOptions options;
  options.funcdata = {bytes, 0};
  options.gofunc = 0;
  auto table = GoPclntab::parse(bytes, options);
  if (!table.ok()) return 0;
  std::array<GoFrame, 8> frames;
  uint64_t lo = table->min_pc();
  uint64_t hi = table->max_pc();
  uint64_t span = hi - lo;
  // Entries, ends, and a spread of pcs across the covered range.
  for (uint32_t i = 0; i < table->function_count() && i < 64; ++i) {
    if (auto f = table->function_at(i)) {
      (void)table->lookup(f->entry);
      (void)table->lookup_frames(f->entry + 1, frames);
    }
  }
  for (uint64_t k = 0; k <= 64; ++k) {
    uint64_t pc = lo + (span / 64) * k;
    (void)table->lookup(pc);
    (void)table->lookup_frames(pc, frames);
  }
  (void)table->lookup(hi);
  return 0;
}
