#include "agent/symbols/elf_file.h"

#include <elf.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace sonde::symbols {
namespace {

// [offset, offset + length) lies inside a buffer of `size` bytes, without overflowing.
bool in_bounds(uint64_t size, uint64_t offset, uint64_t length) {
  return offset <= size && length <= size - offset;
}

// Reads a T at offset; the caller has checked the range. memcpy because hostile files may put
// tables at odd offsets and a misaligned load would be undefined behaviour.
template <typename T>
T load(std::span<const uint8_t> bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

constexpr char kHex[] = "0123456789abcdef";

std::string hex(uint64_t value) {
  char buf[24];
  (void)std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace

// ---- small types ------------------------------------------------------------------------------

const char* machine_name(Machine machine) {
  switch (machine) {
    case Machine::kX86_64: return "x86-64";
    case Machine::kAarch64: return "aarch64";
    case Machine::kOther: return "other";
  }
  return "other";
}

std::optional<std::string_view> SymbolTable::name(uint32_t offset) const {
  if (offset >= strings_.size()) return std::nullopt;
  const auto* start = reinterpret_cast<const char*>(strings_.data()) + offset;
  const size_t room = strings_.size() - offset;
  const void* nul = std::memchr(start, 0, room);
  if (nul == nullptr) return std::nullopt;
  return std::string_view(start, static_cast<const char*>(nul) - start);
}

std::string BuildId::to_string() const {
  std::string out;
  if (kind == Kind::kGo) {
    for (uint8_t c : bytes) out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
    return out;
  }
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

// ---- ElfFile ----------------------------------------------------------------------------------

Result<ElfFile> ElfFile::parse(std::span<const uint8_t> bytes) {
  const uint64_t size = bytes.size();
  if (size < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
    return Error("not an ELF file (no \\x7fELF magic)", ENOEXEC);
  }
  if (bytes[EI_CLASS] == ELFCLASS32) {
    return Error("32-bit ELF (ELFCLASS32) is not supported; only ELF64 binaries can be probed",
                 ENOEXEC);
  }
  if (bytes[EI_CLASS] != ELFCLASS64) return Error("unknown ELF class", ENOEXEC);
  if (bytes[EI_DATA] == ELFDATA2MSB) {
    return Error("big-endian ELF is not supported; only little-endian binaries can be probed",
                 ENOEXEC);
  }
  if (bytes[EI_DATA] != ELFDATA2LSB) return Error("unknown ELF data encoding", ENOEXEC);
  if (size < sizeof(Elf64_Ehdr)) return Error("truncated ELF header", ENOEXEC);
  if (size > kMaxBinaryBytes) return too_large_error("file size", size, kMaxBinaryBytes);

  const auto ehdr = load<Elf64_Ehdr>(bytes, 0);
  ElfFile elf;
  elf.bytes_ = bytes;
  elf.type_ = ehdr.e_type;
  elf.raw_machine_ = ehdr.e_machine;
  elf.machine_ = ehdr.e_machine == EM_X86_64    ? Machine::kX86_64
                 : ehdr.e_machine == EM_AARCH64 ? Machine::kAarch64
                                                : Machine::kOther;

  // Section header table. Counts of 0 with a non-zero table offset use the extended numbering
  // of the gABI: the real count (and name table index) live in section 0.
  uint64_t section_count = ehdr.e_shnum;
  uint64_t names_index = ehdr.e_shstrndx;
  if (ehdr.e_shoff != 0) {
    if (ehdr.e_shentsize != sizeof(Elf64_Shdr)) {
      return Error("bad section header entry size " + std::to_string(ehdr.e_shentsize), ENOEXEC);
    }
    if (!in_bounds(size, ehdr.e_shoff, sizeof(Elf64_Shdr))) {
      return Error("section header table starts past the end of the file (truncated?)", ENOEXEC);
    }
    const auto first = load<Elf64_Shdr>(bytes, ehdr.e_shoff);
    if (section_count == 0) section_count = first.sh_size;
    if (names_index == SHN_XINDEX) names_index = first.sh_link;
    if (section_count > (size - ehdr.e_shoff) / sizeof(Elf64_Shdr)) {
      return Error("section header table (" + std::to_string(section_count) +
                       " entries) extends past the end of the file (truncated?)",
                   ENOEXEC);
    }
    if (section_count > kMaxSections) {
      return too_large_error("section count", section_count, kMaxSections);
    }
    elf.section_table_offset_ = ehdr.e_shoff;
    elf.section_count_ = static_cast<size_t>(section_count);
  }

  // Program header table; PN_XNUM moves the count to section 0's sh_info.
  uint64_t segment_count = ehdr.e_phnum;
  if (segment_count == PN_XNUM && elf.section_count_ > 0) {
    segment_count = load<Elf64_Shdr>(bytes, elf.section_table_offset_).sh_info;
  }
  if (segment_count > 0) {
    if (ehdr.e_phentsize != sizeof(Elf64_Phdr)) {
      return Error("bad program header entry size " + std::to_string(ehdr.e_phentsize), ENOEXEC);
    }
    if (ehdr.e_phoff > size || segment_count > (size - ehdr.e_phoff) / sizeof(Elf64_Phdr)) {
      return Error("program header table extends past the end of the file (truncated?)", ENOEXEC);
    }
    if (segment_count > kMaxSegments) {
      return too_large_error("program header count", segment_count, kMaxSegments);
    }
    elf.segment_table_offset_ = ehdr.e_phoff;
    elf.segment_count_ = static_cast<size_t>(segment_count);
  }

  if (elf.section_count_ > 0 && names_index != SHN_UNDEF) {
    if (names_index >= elf.section_count_) {
      return Error("section name table index " + std::to_string(names_index) + " out of range",
                   ENOEXEC);
    }
    const auto names =
        load<Elf64_Shdr>(bytes, elf.section_table_offset_ + names_index * sizeof(Elf64_Shdr));
    if (names.sh_type == SHT_NOBITS || !in_bounds(size, names.sh_offset, names.sh_size)) {
      return Error("section name table extends past the end of the file (truncated?)", ENOEXEC);
    }
    elf.section_names_ = bytes.subspan(names.sh_offset, names.sh_size);
  }

  // Validating every range here lets the accessors hand out spans without re-checking, and
  // makes a truncated file fail loudly at open rather than deep inside a later lookup.
  for (size_t i = 0; i < elf.section_count_; ++i) {
    const auto shdr = load<Elf64_Shdr>(bytes, elf.section_table_offset_ + i * sizeof(Elf64_Shdr));
    if (i == 0 || shdr.sh_type == SHT_NOBITS || shdr.sh_type == SHT_NULL) continue;
    if (!in_bounds(size, shdr.sh_offset, shdr.sh_size)) {
      return Error(
          "section " + std::to_string(i) + " extends past the end of the file (truncated?)",
          ENOEXEC);
    }
  }
  for (size_t i = 0; i < elf.segment_count_; ++i) {
    const ElfSegment seg = elf.segment(i);
    if (seg.type != PT_LOAD) continue;
    if (!in_bounds(size, seg.offset, seg.filesz)) {
      return Error("loadable segment " + std::to_string(i) +
                       " extends past the end of the file (truncated?)",
                   ENOEXEC);
    }
    if (seg.vaddr + seg.filesz < seg.vaddr) {
      return Error("loadable segment " + std::to_string(i) + " wraps the address space", ENOEXEC);
    }
  }
  return elf;
}

ElfSection ElfFile::section(size_t index) const {
  const auto shdr = load<Elf64_Shdr>(bytes_, section_table_offset_ + index * sizeof(Elf64_Shdr));
  ElfSection s;
  s.index = static_cast<uint32_t>(index);
  s.type = shdr.sh_type;
  s.flags = shdr.sh_flags;
  s.addr = shdr.sh_addr;
  s.offset = shdr.sh_offset;
  s.size = shdr.sh_size;
  s.link = shdr.sh_link;
  s.entsize = shdr.sh_entsize;
  if (shdr.sh_name < section_names_.size()) {
    const auto* start = reinterpret_cast<const char*>(section_names_.data()) + shdr.sh_name;
    const size_t room = section_names_.size() - shdr.sh_name;
    s.name = std::string_view(start, strnlen(start, room));
  }
  return s;
}

std::optional<ElfSection> ElfFile::find_section(std::string_view name) const {
  for (size_t i = 1; i < section_count_; ++i) {
    ElfSection s = section(i);
    // An SHT_NULL header is inactive and its other fields are undefined: parse() did not check
    // its range, so it is never handed out (a crafted one pointed far past the file).
    if (s.type != SHT_NULL && s.name == name) return s;
  }
  return std::nullopt;
}

ElfSegment ElfFile::segment(size_t index) const {
  const auto phdr = load<Elf64_Phdr>(bytes_, segment_table_offset_ + index * sizeof(Elf64_Phdr));
  return ElfSegment{phdr.p_type,  phdr.p_flags,  phdr.p_offset,
                    phdr.p_vaddr, phdr.p_filesz, phdr.p_memsz};
}

Result<std::optional<SymbolTable>> ElfFile::symbol_table(uint32_t section_type) const {
  for (size_t i = 1; i < section_count_; ++i) {
    const ElfSection s = section(i);
    if (s.type != section_type) continue;
    const std::string what = s.name.empty() ? "symbol table" : std::string(s.name);
    if (s.entsize != SymbolTable::kEntrySize) {
      return Error(what + ": bad entry size " + std::to_string(s.entsize), ENOEXEC);
    }
    if (s.link == 0 || s.link >= section_count_) {
      return Error(what + ": string table index " + std::to_string(s.link) + " out of range",
                   ENOEXEC);
    }
    const ElfSection strings = section(s.link);
    if (strings.type != SHT_STRTAB) {
      return Error(what + ": linked section " + std::to_string(s.link) + " is not a string table",
                   ENOEXEC);
    }
    if (s.size / SymbolTable::kEntrySize > kMaxSymbols) {
      return too_large_error(what + " symbol count", s.size / SymbolTable::kEntrySize, kMaxSymbols);
    }
    if (strings.size > kMaxStringTableBytes) {
      return too_large_error(what + " string table bytes", strings.size, kMaxStringTableBytes);
    }
    // Both ranges were validated by parse().
    return std::optional<SymbolTable>(
        SymbolTable(bytes_.subspan(s.offset, s.size - s.size % SymbolTable::kEntrySize),
                    bytes_.subspan(strings.offset, strings.size)));
  }
  return std::optional<SymbolTable>();
}

std::optional<BuildId> find_build_id_note(std::span<const uint8_t> notes, BuildId::Kind kind) {
  // Notes are 4-byte aligned in ELF64 files produced by every toolchain we care about; the
  // gABI's 8-byte variant is only used for .note.gnu.property, which holds no build-id.
  uint64_t pos = 0;
  while (in_bounds(notes.size(), pos, sizeof(Elf64_Nhdr))) {
    const auto nhdr = load<Elf64_Nhdr>(notes, pos);
    pos += sizeof(Elf64_Nhdr);
    const uint64_t name_at = pos;
    const uint64_t name_len = align_up(nhdr.n_namesz, 4);
    if (!in_bounds(notes.size(), pos, name_len)) return std::nullopt;
    pos += name_len;
    const uint64_t desc_at = pos;
    const uint64_t desc_len = align_up(nhdr.n_descsz, 4);
    if (!in_bounds(notes.size(), pos, desc_len)) return std::nullopt;
    pos += desc_len;

    const auto name =
        std::string_view(reinterpret_cast<const char*>(notes.data()) + name_at, nhdr.n_namesz);
    if (nhdr.n_descsz == 0) continue;
    const auto desc = notes.subspan(desc_at, nhdr.n_descsz);
    if (kind == BuildId::Kind::kGnu && nhdr.n_type == NT_GNU_BUILD_ID &&
        name == std::string_view("GNU\0", 4)) {
      return BuildId{BuildId::Kind::kGnu, desc};
    }
    // The Go linker's build-id note: name "Go" (NUL-padded to 4), type 4.
    constexpr uint32_t kGoBuildIdTag = 4;
    if (kind == BuildId::Kind::kGo && nhdr.n_type == kGoBuildIdTag &&
        name == std::string_view("Go\0\0", 4)) {
      return BuildId{BuildId::Kind::kGo, desc};
    }
  }
  return std::nullopt;
}

std::optional<BuildId> ElfFile::scan_notes(BuildId::Kind kind) const {
  for (size_t i = 0; i < segment_count_; ++i) {
    const ElfSegment seg = segment(i);
    if (seg.type != PT_NOTE || !in_bounds(bytes_.size(), seg.offset, seg.filesz)) continue;
    if (auto id = find_build_id_note(bytes_.subspan(seg.offset, seg.filesz), kind)) return id;
  }
  for (size_t i = 1; i < section_count_; ++i) {
    const ElfSection s = section(i);
    if (s.type != SHT_NOTE) continue;
    if (auto id = find_build_id_note(bytes_.subspan(s.offset, s.size), kind)) return id;
  }
  return std::nullopt;
}

std::optional<BuildId> ElfFile::build_id() const {
  if (auto gnu = scan_notes(BuildId::Kind::kGnu)) return gnu;
  return scan_notes(BuildId::Kind::kGo);
}

std::optional<ElfSegment> ElfFile::executable_segment_for(uint64_t vaddr) const {
  for (size_t i = 0; i < segment_count_; ++i) {
    const ElfSegment seg = segment(i);
    if (seg.type != PT_LOAD || (seg.flags & PF_X) == 0) continue;
    if (vaddr >= seg.vaddr && vaddr - seg.vaddr < seg.filesz) return seg;
  }
  return std::nullopt;
}

Result<uint64_t> ElfFile::file_offset_of(uint64_t vaddr) const {
  const auto seg = executable_segment_for(vaddr);
  if (!seg) {
    return Error("address " + hex(vaddr) + " is in no executable segment", ENOEXEC);
  }
  return seg->offset + (vaddr - seg->vaddr);
}

Result<std::span<const uint8_t>> ElfFile::code_at(uint64_t vaddr, uint64_t size) const {
  const auto seg = executable_segment_for(vaddr);
  if (!seg) return Error("address is in no executable segment", ENOEXEC);
  const uint64_t rel = vaddr - seg->vaddr;
  if (size > seg->filesz - rel) return Error("code runs past its segment", ENOEXEC);
  return bytes_.subspan(seg->offset + rel, size);
}

Status map_elf(const std::string& path, MappedFile& file, std::optional<ElfFile>& elf,
               const std::function<Status()>& index) {
  ASSIGN_OR_RETURN(file, MappedFile::open(path));
  auto parsed = ElfFile::parse(file.bytes());
  RETURN_IF_ERROR(file.check(path));
  if (!parsed.ok()) return parsed.error().wrap(path);
  elf.emplace(std::move(parsed).value());
  Status indexed = index();
  RETURN_IF_ERROR(file.check(path));
  if (!indexed.ok()) return indexed.error().wrap(path);
  return ok_status();
}

Status parse_elf(std::span<const uint8_t> bytes, std::optional<ElfFile>& elf,
                 const std::function<Status()>& index) {
  ASSIGN_OR_RETURN(ElfFile parsed, ElfFile::parse(bytes));
  elf.emplace(parsed);
  return index();
}

}  // namespace sonde::symbols
