// ElfFile: a bounds-checked, read-only view of an ELF64 little-endian file (x86-64, aarch64 and
// any other machine for symbol lookup). It usually views a MappedFile (mapped_file.h), whose
// guard turns a file truncated under the view into zeros rather than a SIGBUS.
//
// The view never copies the file: it holds a span over bytes owned by someone else (a
// MappedFile, a test buffer, a fuzzer input) and must not outlive them. Every offset, size and
// count read from the file is checked against the span before use, so a truncated or hostile
// file yields an Error — never an out-of-bounds read, a hang or an allocation sized by the file.
// Structures are read with memcpy, so misaligned tables in hostile files are harmless.
//
// parse() validates the header, the program and section header tables, the section name table,
// every section with file contents and every PT_LOAD segment; later accessors can therefore rely
// on those ranges. Symbol and string tables are described, not copied: iterating symbols costs
// no allocation. ELF32 and big-endian files are rejected with a message saying so.
//
// Bounded work (limits.h): parse() rejects files over kMaxBinaryBytes or with more than
// kMaxSections section headers or kMaxSegments program headers, and symbol_table()
// tables over kMaxSymbols entries or kMaxStringTableBytes of names, with the "too large to
// instrument" verdict (is_too_large()), before anyone walks them.
//
// Thread-safety: an ElfFile is immutable after parse(); concurrent reads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agent/symbols/limits.h"
#include "agent/symbols/mapped_file.h"
#include "common/result.h"

namespace sonde::symbols {

// The ELF machines whose instructions sonde decodes.
enum class Machine : uint8_t { kX86_64, kAarch64, kOther };

const char* machine_name(Machine machine);

struct ElfSection {
  uint32_t index = 0;
  std::string_view name;  // points into the section name table; "" when unnamed
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

struct ElfSegment {
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
};

// One entry of a symbol table, with its name still an offset into the string table.
struct ElfSymbol {
  uint32_t name_offset = 0;
  uint8_t info = 0;
  uint16_t section_index = 0;
  uint64_t value = 0;
  uint64_t size = 0;

  uint8_t type() const { return info & 0xf; }
  uint8_t binding() const { return info >> 4; }
};

// A symbol table (.symtab or .dynsym) and its linked string table, both validated spans.
class SymbolTable {
 public:
  SymbolTable(std::span<const uint8_t> entries, std::span<const uint8_t> strings)
      : entries_(entries), strings_(strings) {}

  size_t size() const { return entries_.size() / kEntrySize; }
  // Inline: the resolver calls this for every entry of tables with 100k+ symbols.
  ElfSymbol symbol(size_t i) const {
    // Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value u64, st_size u64.
    const uint8_t* p = entries_.data() + i * kEntrySize;
    ElfSymbol s;
    std::memcpy(&s.name_offset, p, 4);
    s.info = p[4];
    std::memcpy(&s.section_index, p + 6, 2);
    std::memcpy(&s.value, p + 8, 8);
    std::memcpy(&s.size, p + 16, 8);
    return s;
  }
  // The NUL-terminated name at offset, or nullopt when it is out of range or unterminated.
  std::optional<std::string_view> name(uint32_t offset) const;
  // The raw string table, for callers that compare names without measuring them first.
  std::span<const uint8_t> strings() const { return strings_; }

  static constexpr size_t kEntrySize = 24;  // sizeof(Elf64_Sym)

 private:
  std::span<const uint8_t> entries_;
  std::span<const uint8_t> strings_;
};

// A build identifier found in an ELF note: GNU (NT_GNU_BUILD_ID, raw bytes, usually 20) or Go
// (the linker's "Go" note of type 4, an ASCII string).
struct BuildId {
  enum class Kind : uint8_t { kGnu, kGo };
  Kind kind = Kind::kGnu;
  std::span<const uint8_t> bytes;

  // Lowercase hex for GNU build-ids, the string itself for Go build-ids.
  std::string to_string() const;
};

// The first build-id note of kind in a note area (a PT_NOTE segment or SHT_NOTE section);
// malformed notes end the search. The result points into notes.
std::optional<BuildId> find_build_id_note(std::span<const uint8_t> notes, BuildId::Kind kind);

class ElfFile {
 public:
  // Validates bytes as an ELF64 little-endian file; see the header comment for what is checked.
  static Result<ElfFile> parse(std::span<const uint8_t> bytes);

  std::span<const uint8_t> bytes() const { return bytes_; }
  Machine machine() const { return machine_; }
  uint16_t raw_machine() const { return raw_machine_; }
  uint16_t type() const { return type_; }

  size_t section_count() const { return section_count_; }
  ElfSection section(size_t index) const;  // index < section_count()
  // The first active section (not SHT_NULL) so named: its range lies inside the file unless it
  // is SHT_NOBITS.
  std::optional<ElfSection> find_section(std::string_view name) const;

  size_t segment_count() const { return segment_count_; }
  ElfSegment segment(size_t index) const;  // index < segment_count()

  // The table of the first section of type SHT_SYMTAB or SHT_DYNSYM, nullopt when there is
  // none; an Error when its entry size, link or string table is malformed.
  Result<std::optional<SymbolTable>> symbol_table(uint32_t section_type) const;

  // The first GNU build-id note, else the first Go build-id note, from PT_NOTE segments and
  // SHT_NOTE sections. Malformed notes are skipped, not reported.
  std::optional<BuildId> build_id() const;

  // The file offset of vaddr through the executable PT_LOAD segment whose file-backed part
  // holds it: what a uprobe attached by offset (libbpf's func_offset, perf's uprobe_path
  // offset) needs. An Error when no executable segment covers vaddr.
  Result<uint64_t> file_offset_of(uint64_t vaddr) const;

  // The bytes at [vaddr, vaddr + size) inside one executable PT_LOAD segment.
  Result<std::span<const uint8_t>> code_at(uint64_t vaddr, uint64_t size) const;

 private:
  ElfFile() = default;
  std::optional<BuildId> scan_notes(BuildId::Kind kind) const;
  std::optional<ElfSegment> executable_segment_for(uint64_t vaddr) const;

  std::span<const uint8_t> bytes_;
  Machine machine_ = Machine::kOther;
  uint16_t raw_machine_ = 0;
  uint16_t type_ = 0;
  uint64_t section_table_offset_ = 0;
  size_t section_count_ = 0;
  uint64_t segment_table_offset_ = 0;
  size_t segment_count_ = 0;
  std::span<const uint8_t> section_names_;
};

// For readers that keep an ELF file mapped (symbolizers): maps `path` into `file`, parses it
// into `elf` and runs `index` (the reader's own pass over `elf`). The file is checked after
// parsing and after indexing (a tenant may truncate or rewrite it meanwhile:
// MappedFile::check()), and every error names `path`. On error the caller discards `file` and
// `elf`.
Status map_elf(const std::string& path, MappedFile& file, std::optional<ElfFile>& elf,
               const std::function<Status()>& index);
// The same over bytes the caller keeps alive (tests, fuzzers): parses them into `elf`, then runs
// `index`.
Status parse_elf(std::span<const uint8_t> bytes, std::optional<ElfFile>& elf,
                 const std::function<Status()>& index);

}  // namespace sonde::symbols
