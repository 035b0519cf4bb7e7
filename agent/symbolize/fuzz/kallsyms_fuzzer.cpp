// libFuzzer target: arbitrary text as /proc/kallsyms. Parsing may fail; a table that parses
// must answer lookups and index every entry without reading out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/symbolize/kallsyms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto table = sonde::symbolize::KallsymsTable::parse(text);
  if (!table.ok()) return 0;
  for (size_t i = 0; i < table->size(); ++i) {
    auto s = table->at(i);
    auto hit = table->lookup(s.address);
    if (!hit || hit->address != s.address) __builtin_trap();  // a listed address must resolve
    (void)table->lookup(s.address + 1);
    (void)table->lookup(s.address - 1);
  }
  (void)table->lookup(0);
  (void)table->lookup(UINT64_MAX);
  return 0;
}
