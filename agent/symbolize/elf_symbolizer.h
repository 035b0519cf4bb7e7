// ElfSymbolizer: address -> function name for native (C, C++, Rust) binaries from the ELF
// symbol table, for CPU profiles.
//
// Opening maps the file once and builds a compact table of its function symbols sorted by
// address: 16 bytes per symbol (address, 32-bit size, 32-bit name offset) with the names left in
// the mapped string table. Function and data symbols of `.symtab` are used when it exists, else
// those of `.dynsym`. Resolution follows llvm-symbolizer: the symbol with the greatest start <=
// address wins; a symbol with a size covers [start, start + size) only, a zero-size symbol
// extends to the next symbol; of several symbols at one address the largest, then the greatest
// name. Names are
// returned mangled; demangle only what is printed (demangle()). Callers symbolizing return
// addresses look up `pc - 1`. Owns the mapping; immutable after open, lookups allocate nothing
// and may run on several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "common/result.h"

namespace sonde::symbolize {

struct ElfSymbolHit {
  std::string_view name;  // mangled, pointing into the mapped string table
  uint64_t address = 0;   // symbol start
  uint64_t size = 0;
  uint64_t offset = 0;  // looked-up address minus `address`
};

class ElfSymbolizer {
 public:
  static Result<std::unique_ptr<ElfSymbolizer>> open(const std::string& path);
  // Over bytes owned by the caller, which must outlive the object.
  static Result<std::unique_ptr<ElfSymbolizer>> from_bytes(std::span<const uint8_t> bytes);

  std::optional<ElfSymbolHit> lookup(uint64_t address) const;

  size_t size() const { return entries_.size(); }
  // Heap bytes of the table (the names stay in the mapping).
  size_t table_bytes() const { return entries_.capacity() * sizeof(Entry); }

 private:
  struct Entry {
    uint64_t address;
    uint32_t size;
    uint32_t name;  // offset into strings_
  };
  ElfSymbolizer() = default;
  Status build();
  std::string_view name_at(uint32_t offset) const;

  symbols::MappedFile file_;
  std::optional<symbols::ElfFile> elf_;
  std::span<const uint8_t> strings_;
  std::vector<Entry> entries_;
};

// The demangled form of an Itanium C++ name, or the name itself when it is not one (C, Go,
// Rust v0 names are returned unchanged).
std::string demangle(std::string_view name);

}  // namespace sonde::symbolize
