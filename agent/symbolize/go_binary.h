// GoBinary: the one reader of a Go executable, for everything that reads one — the symbolizer
// (address -> function, file, line), the Go TLS verdict and its probe sites (function name ->
// address range), and the toolchain version.
//
// The function table (`.gopclntab`) is found by its section (`.gopclntab`, or the PIE's
// `.data.rel.ro.gopclntab`), else by the `runtime.pclntab` symbol, else by scanning the file for
// the table's header — only where that can pay off: the section headers are gone, or the file
// carries Go's own marks (`.go.buildinfo`, `.note.go.buildid`, `.go.module`; a stripped cgo PIE
// merges its table into `.data.rel.ro`). A 100 MB C binary is never scanned.
//
// Function entries of the 1.18+ layouts are offsets from the text start, taken from
//  1. the runtime's module data (`.go.module` from Go 1.26, else found in the writable segments,
//     see find_go_moduledata()): moduledata.text, what the runtime itself adds;
//  2. else the table header's textStart (runtime.text up to Go 1.25);
// and never from `.text`, which starts before runtime.text in a binary the system linker linked
// (cgo: crt code first). When both exist they must agree; Go 1.26+ writes 0 in the header, so a
// 1.26+ table without module data has no known text start and is refused: an address that may
// be wrong is never given out.
//
// For inline trees (1.18+), `gofunc` comes from the `go:func.*`/`go.func.*` symbol, else the
// `.go.func` section (Go 1.27), else the module data's word for it where the layout's is known,
// and only if it points into read-only data.
//
// The version comes from `.go.buildinfo`, else from the table's layout (go_build_info.h).
//
// Addresses are link-time virtual addresses (subtract the load bias of a PIE first). Owns the
// mapping (open()) or views the caller's bytes (from_bytes()); immutable after construction,
// lookups are allocation free and may run on several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "agent/symbolize/go_build_info.h"
#include "agent/symbolize/go_pclntab.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/mapped_file.h"
#include "common/result.h"

namespace sonde::symbolize {

struct GoBinaryOptions {
  // The pc-lookup index (GoPclntabOptions::build_index) and the inline trees: what the
  // symbolizer needs; a caller that only looks functions up by name turns both off.
  bool build_index = true;
  bool inline_trees = true;
};

class GoBinary {
 public:
  enum class Found : uint8_t { kSection, kSymbol, kMagicScan };
  // Where the text start came from (the 1.2/1.16 layouts hold absolute entries: kAbsolute).
  enum class TextFrom : uint8_t { kAbsolute, kModuleData, kHeader };

  // An Error when the file is not ELF or carries no Go pclntab, or its text start is unknown.
  static Result<std::unique_ptr<GoBinary>> open(const std::string& path,
                                                const GoBinaryOptions& options = {});
  // Same over bytes owned by the caller (a mapped OpenBinary, tests, fuzzers); they must outlive
  // the object.
  static Result<std::unique_ptr<GoBinary>> from_bytes(std::span<const uint8_t> bytes,
                                                      const GoBinaryOptions& options = {});

  const GoPclntab& pclntab() const { return *table_; }
  const symbols::ElfFile& elf() const { return *elf_; }
  Found found_by() const { return found_by_; }
  TextFrom text_from() const { return text_from_; }
  bool has_inline_trees() const { return inline_trees_; }
  // The toolchain that built it: `.go.buildinfo`, else what the table's layout implies (its
  // text says so). Computed at construction.
  const GoVersion& version() const { return version_; }
  bool version_from_build_info() const { return version_from_build_info_; }

 private:
  GoBinary() = default;
  Status locate(const GoBinaryOptions& options);

  symbols::MappedFile file_;
  std::optional<symbols::ElfFile> elf_;
  std::optional<GoPclntab> table_;
  Found found_by_ = Found::kSection;
  TextFrom text_from_ = TextFrom::kAbsolute;
  bool inline_trees_ = false;
  GoVersion version_;
  bool version_from_build_info_ = false;
};

// Whether elf looks like a Go binary at all: a function table section, or Go's own marks. Cheap
// (section names only); decides whether a binary without crypto/tls symbols is worth opening
// as a GoBinary.
bool looks_like_go(const symbols::ElfFile& elf);

const char* text_from_name(GoBinary::TextFrom from);

}  // namespace sonde::symbolize
