// KallsymsTable: the kernel's symbol list (/proc/kallsyms text) parsed once into a compact
// table sorted by address, for turning kernel instruction pointers of profiles into names.
//
// Memory: 14 bytes per symbol (8-byte address, 4-byte name offset, 2-byte module index in
// three parallel arrays) plus every name stored once in one string blob (the symbol type letter,
// the name and a NUL). Modules are kept: a symbol of `[nf_tables]` reports module "nf_tables",
// BPF programs report module "bpf". Immutable after parse; lookups are const, allocation free
// and safe from several threads at once.
//
// kallsyms carries no symbol sizes, so a symbol is taken to extend up to the next one (what
// perf does for kallsyms); several symbols at one address resolve to one preferred name: global
// before weak before local, then fewer leading underscores, then first in file order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sonde::symbolize {

// Largest kallsyms text read and parsed: /proc/kallsyms is ~10 MB (120k lines); 256 MiB bounds
// the agent's memory if the kernel's list (BPF programs, modules) ever grows without bound.
// Over it, read() and parse() fail with code EFBIG.
inline constexpr size_t kMaxKallsymsBytes = size_t{256} << 20;

// One resolved kernel address. The string_views point into the table that produced it and
// stay valid as long as that table lives.
struct KernelSymbol {
  std::string_view name;
  std::string_view module;  // "" for the kernel image, otherwise the name inside [...]
  uint64_t address = 0;     // symbol start
  uint64_t offset = 0;      // looked-up address minus `address`
  char type = '?';          // nm-style type letter from kallsyms ('T', 't', 'W', ...)
};

class KallsymsTable {
 public:
  KallsymsTable() = default;

  // Parses kallsyms text ("<hex address> <type> <name>[\t[module]]" per line). Malformed lines
  // are an error naming the line number; an empty text gives an empty table. At most
  // kMaxKallsymsBytes of text and 4M symbols (EFBIG beyond).
  static Result<KallsymsTable> parse(std::string_view text);

  // Reads and parses <proc_root>/kallsyms. Addresses are all zero unless the caller may see
  // them (root, or kptr_restrict permits): that is reported as an error, not an empty table.
  static Result<KallsymsTable> read(const std::string& proc_root = "/proc");

  // The symbol containing `address` (greatest start <= address), or nullopt below the first.
  std::optional<KernelSymbol> lookup(uint64_t address) const;

  size_t size() const { return addresses_.size(); }
  KernelSymbol at(size_t index) const;

  // Bytes held by the per-symbol arrays (capacity, excluding names) and by the name blob.
  size_t table_bytes() const;
  size_t name_bytes() const { return names_.capacity(); }

 private:
  std::vector<uint64_t> addresses_;
  std::vector<uint32_t> name_offsets_;  // into names_: type letter, name, NUL
  std::vector<uint16_t> modules_;       // index into module_names_, 0 = kernel image
  std::string names_;
  std::vector<std::string> module_names_;
};

// Reads a whole file whose size stat() cannot tell (procfs), in one growing buffer; an Error
// (EFBIG) when it holds more than max_bytes (kMaxKallsymsBytes by default).
Result<std::string> read_proc_file(const std::string& path);
Result<std::string> read_proc_file(const std::string& path, size_t max_bytes);

}  // namespace sonde::symbolize
