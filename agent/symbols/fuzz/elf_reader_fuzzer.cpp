// libFuzzer target for the ELF reader and everything that reads ELF bytes after it: section
// and segment tables, notes, both symbol tables and their names, file offsets and the
// return-site decoders. Any crash, sanitizer report, hang or large allocation is a bug.
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"

namespace {

using sonde::symbols::ElfFile;

// The first few function names of a table, so resolve() takes its "found" paths on inputs
// derived from real binaries instead of only ever missing.
void collect_names(const ElfFile& elf, uint32_t type, std::vector<std::string>& names) {
  auto table = elf.symbol_table(type);
  if (!table.ok() || !table->has_value()) return;
  const auto& t = **table;
  for (size_t i = 1; i < t.size() && names.size() < 8; ++i) {
    auto name = t.name(t.symbol(i).name_offset);
    if (name && !name->empty()) names.emplace_back(*name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = ElfFile::parse(std::span<const uint8_t>(data, size));
  if (!elf.ok()) return 0;
  for (size_t i = 0; i < elf->section_count(); ++i) (void)elf->section(i);
  for (size_t i = 0; i < elf->segment_count(); ++i) {
    const auto seg = elf->segment(i);
    (void)elf->file_offset_of(seg.vaddr);
  }
  if (auto id = elf->build_id()) (void)id->to_string();
  (void)elf->find_section(".text");
  std::vector<std::string> names = {"main", "_start"};
  collect_names(*elf, SHT_SYMTAB, names);
  collect_names(*elf, SHT_DYNSYM, names);
  (void)sonde::symbols::resolve(*elf, names);
  return 0;
}
