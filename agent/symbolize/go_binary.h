// GoBinary: a Go executable opened for symbolization — its file mapped once and its
// `.gopclntab` located and parsed, with the inline-tree memory wired in.
//
// The table is found by the `.gopclntab` (or `.data.rel.ro.gopclntab`) section, else by the
// `runtime.pclntab` symbol, else — only when the section headers were removed — by scanning
// the file for the pclntab magic. For Go 1.18+ the `go:func.*` base that inline trees hang off is
// taken from the `go:func.*`/`go.func.*` symbol, else from the runtime's module data found by
// scanning the writable segments. Addresses are link-time virtual addresses (subtract the load
// bias of a PIE first). Owns the mapping; immutable after open, lookups are allocation free
// and may run on several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "agent/symbolize/go_pclntab.h"
#include "agent/symbols/elf_file.h"
#include "common/result.h"

namespace sonde::symbolize {

class GoBinary {
 public:
  enum class Found : uint8_t { kSection, kSymbol, kMagicScan };

  // An Error when the file is not ELF or carries no Go pclntab.
  static Result<std::unique_ptr<GoBinary>> open(const std::string& path);
  // Same over bytes owned by the caller (tests, fuzzers); they must outlive the object.
  static Result<std::unique_ptr<GoBinary>> from_bytes(std::span<const uint8_t> bytes);

  const GoPclntab& pclntab() const { return *table_; }
  Found found_by() const { return found_by_; }
  bool has_inline_trees() const { return inline_trees_; }

 private:
  GoBinary() = default;
  Status locate();

  symbols::MappedFile file_;
  std::optional<symbols::ElfFile> elf_;
  std::optional<GoPclntab> table_;
  Found found_by_ = Found::kSection;
  bool inline_trees_ = false;
};

}  // namespace sonde::symbolize
