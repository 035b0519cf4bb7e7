// BinarySymbolizer: address -> source frames for one user-space binary, whatever it is built
// from: Go code through the pclntab (function, file, line, inlined frames), everything else
// (C, C++, Rust, cgo parts of Go programs) through the ELF symbol table (function only).
//
// Owns one read-only mapping of the file shared by both tables. Immutable after open; lookups
// allocate nothing and may run on several threads. The mapping is guarded (mapped_file.h): a
// file truncated while open makes open() fail, or later lookups return empty names and
// file_changed() true, never a SIGBUS. Tables are bounded by the caps of limits.h; a binary
// over them fails open() with the "too large" verdict (symbols::is_too_large()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agent/symbolize/elf_symbolizer.h"
#include "agent/symbolize/go_binary.h"
#include "agent/symbols/elf_file.h"
#include "common/result.h"

namespace sonde::symbolize {

struct SymbolizedFrame {
  std::string_view function;  // mangled for ELF symbols (demangle() to print), Go names as is
  std::string_view file;      // empty when unknown (ELF symbols carry no file)
  int32_t line = 0;           // 0 when unknown
  uint64_t offset = 0;        // address minus the function's start (physical frame only)
  bool inlined = false;
};

class BinarySymbolizer {
 public:
  // Maps path and reads whichever tables it has; an Error when it has neither a Go pclntab nor
  // an ELF symbol table.
  static Result<std::unique_ptr<BinarySymbolizer>> open(const std::string& path);
  // Takes over a mapping made by the caller (e.g. of the very file it identified).
  static Result<std::unique_ptr<BinarySymbolizer>> from_mapping(symbols::MappedFile file,
                                                                const std::string& what);

  // Frames at address (a link-time virtual address), innermost first, physical function last;
  // at most out.size(). 0 when no table covers the address.
  size_t symbolize(uint64_t address, std::span<SymbolizedFrame> out) const;

  // True once the file was truncated or failed to read under the mapping (mapped_file.h):
  // lookups stay safe but may return empty names; re-open the binary.
  bool file_changed() const;

  // Heap bytes held for lookups (tables, indexes); the mapping itself is page cache.
  size_t memory_bytes() const;

 private:
  BinarySymbolizer() = default;

  symbols::MappedFile file_;
  std::unique_ptr<GoBinary> go_;
  std::unique_ptr<ElfSymbolizer> elf_;
};

}  // namespace sonde::symbolize
