#include "agent/symbolize/elf_symbolizer.h"

#include <cxxabi.h>
#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace sonde::symbolize {

Result<std::unique_ptr<ElfSymbolizer>> ElfSymbolizer::open(const std::string& path) {
  std::unique_ptr<ElfSymbolizer> self(new ElfSymbolizer());
  RETURN_IF_ERROR(symbols::map_elf(path, self->file_, self->elf_, [&] { return self->build(); }));
  return self;
}

Result<std::unique_ptr<ElfSymbolizer>> ElfSymbolizer::from_bytes(std::span<const uint8_t> bytes) {
  std::unique_ptr<ElfSymbolizer> self(new ElfSymbolizer());
  RETURN_IF_ERROR(symbols::parse_elf(bytes, self->elf_, [&] { return self->build(); }));
  return self;
}

Status ElfSymbolizer::build() {
  ASSIGN_OR_RETURN(std::optional<symbols::SymbolTable> table, elf_->symbol_table(SHT_SYMTAB));
  if (!table) {
    ASSIGN_OR_RETURN(table, elf_->symbol_table(SHT_DYNSYM));
  }
  if (!table) return Error("no symbol table (.symtab or .dynsym)");
  strings_ = table->strings();

  for (size_t i = 0; i < table->size(); ++i) {
    symbols::ElfSymbol sym = table->symbol(i);
    // Data symbols count too: assembly keeps constant tables in .text (OpenSSL's K512), and
    // llvm-symbolizer names those bytes after them.
    if (sym.type() != STT_FUNC && sym.type() != STT_GNU_IFUNC && sym.type() != STT_OBJECT) {
      continue;
    }
    if (sym.section_index == SHN_UNDEF || sym.section_index >= SHN_LORESERVE) continue;
    if (sym.value == 0 || sym.name_offset == 0 || sym.name_offset >= strings_.size()) continue;
    // Sizes beyond 4 GiB do not occur in code; clamping keeps the entry at 16 bytes.
    uint32_t size = static_cast<uint32_t>(std::min<uint64_t>(sym.size, UINT32_MAX));
    entries_.push_back(Entry{sym.value, size, sym.name_offset});
  }
  // Stably sorted by (address, size): of symbols sharing an address the largest, then the one
  // listed last in the table, comes last, where upper_bound lands.
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.address != b.address) return a.address < b.address;
    return a.size < b.size;
  });
  entries_.shrink_to_fit();
  return ok_status();
}

std::optional<ElfSymbolHit> ElfSymbolizer::lookup(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.address; });
  if (it == entries_.begin()) return std::nullopt;
  const Entry& e = *(it - 1);
  if (e.size != 0 && address - e.address >= e.size) return std::nullopt;
  return ElfSymbolHit{name_at(e.name), e.address, e.size, address - e.address};
}

std::string_view ElfSymbolizer::name_at(uint32_t offset) const {
  // Offsets were checked against the table at build; the name ends at a NUL inside it or at
  // the table's end.
  const char* start = reinterpret_cast<const char*>(strings_.data()) + offset;
  size_t room = strings_.size() - offset;
  const void* nul = std::memchr(start, 0, room);
  return std::string_view(start,
                          nul ? static_cast<size_t>(static_cast<const char*>(nul) - start) : room);
}

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  std::string mangled(name);
  int status = 0;
  char* out = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return mangled;
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace sonde::symbolize
