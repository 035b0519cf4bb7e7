#include "agent/symbolize/go_binary.h"

#include <elf.h>

#include <cinttypes>
#include <cstdio>
#include <utility>

namespace sonde::symbolize {
namespace {

// The file-backed bytes of the PT_LOAD segment holding vaddr, with that segment's start.
std::optional<GoMemoryRegion> segment_region(const symbols::ElfFile& elf, uint64_t vaddr) {
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    symbols::ElfSegment s = elf.segment(i);
    if (s.type != PT_LOAD || vaddr < s.vaddr || vaddr - s.vaddr >= s.filesz) continue;
    return GoMemoryRegion{elf.bytes().subspan(s.offset, s.filesz), s.vaddr};
  }
  return std::nullopt;
}

// vaddr lies in a loaded segment that is neither writable nor executable (.rodata and what the
// Go linker puts beside it).
bool in_read_only_data(const symbols::ElfFile& elf, uint64_t vaddr) {
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    symbols::ElfSegment s = elf.segment(i);
    if (s.type == PT_LOAD && vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) {
      return (s.flags & (PF_W | PF_X)) == 0;
    }
  }
  return false;
}

std::optional<uint64_t> symbol_value(const symbols::ElfFile& elf, std::string_view name) {
  auto table = elf.symbol_table(SHT_SYMTAB);
  if (!table.ok() || !table->has_value()) return std::nullopt;
  const symbols::SymbolTable& symtab = **table;
  for (size_t i = 0; i < symtab.size(); ++i) {
    symbols::ElfSymbol sym = symtab.symbol(i);
    if (symtab.name(sym.name_offset) == name) return sym.value;
  }
  return std::nullopt;
}

std::optional<symbols::ElfSection> present_section(const symbols::ElfFile& elf,
                                                   std::string_view name) {
  auto s = elf.find_section(name);
  if (!s || s->type == SHT_NOBITS || s->offset > elf.bytes().size() ||
      s->size > elf.bytes().size() - s->offset) {
    return std::nullopt;
  }
  return s;
}

std::string hex(uint64_t v) {
  char buf[24];
  (void)std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
  return buf;
}

// The runtime's module data of the table at table_vaddr: its own section from Go 1.26, else
// somewhere in a writable segment (.noptrdata).
std::optional<GoModuleData> module_data(const symbols::ElfFile& elf, std::span<const uint8_t> table,
                                        uint64_t table_vaddr) {
  if (table_vaddr == 0) return std::nullopt;
  if (auto s = present_section(elf, ".go.module")) {
    auto md =
        find_go_moduledata(table, table_vaddr, {elf.bytes().subspan(s->offset, s->size), s->addr});
    if (md) return md;
  }
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    symbols::ElfSegment s = elf.segment(i);
    if (s.type != PT_LOAD || (s.flags & PF_W) == 0) continue;
    auto md =
        find_go_moduledata(table, table_vaddr, {elf.bytes().subspan(s.offset, s.filesz), s.vaddr});
    if (md) return md;
  }
  return std::nullopt;
}

}  // namespace

bool looks_like_go(const symbols::ElfFile& elf) {
  for (const char* name : {".gopclntab", ".data.rel.ro.gopclntab", ".go.buildinfo",
                           ".note.go.buildid", ".go.module"}) {
    if (elf.find_section(name)) return true;
  }
  return false;
}

const char* text_from_name(GoBinary::TextFrom from) {
  switch (from) {
    case GoBinary::TextFrom::kAbsolute: return "absolute entries";
    case GoBinary::TextFrom::kModuleData: return "module data";
    case GoBinary::TextFrom::kHeader: return "table header";
  }
  return "?";
}

Result<std::unique_ptr<GoBinary>> GoBinary::open(const std::string& path,
                                                 const GoBinaryOptions& options) {
  std::unique_ptr<GoBinary> self(new GoBinary());
  RETURN_IF_ERROR(
      symbols::map_elf(path, self->file_, self->elf_, [&] { return self->locate(options); }));
  return self;
}

Result<std::unique_ptr<GoBinary>> GoBinary::from_bytes(std::span<const uint8_t> bytes,
                                                       const GoBinaryOptions& options) {
  std::unique_ptr<GoBinary> self(new GoBinary());
  RETURN_IF_ERROR(symbols::parse_elf(bytes, self->elf_, [&] { return self->locate(options); }));
  return self;
}

Status GoBinary::locate(const GoBinaryOptions& wanted) {
  const symbols::ElfFile& elf = *elf_;
  std::span<const uint8_t> table;
  uint64_t table_vaddr = 0;

  std::optional<symbols::ElfSection> section = present_section(elf, ".gopclntab");
  if (!section) section = present_section(elf, ".data.rel.ro.gopclntab");
  if (section) {
    table = elf.bytes().subspan(section->offset, section->size);
    table_vaddr = section->addr;
    found_by_ = Found::kSection;
  } else if (auto at = symbol_value(elf, "runtime.pclntab")) {
    auto region = segment_region(elf, *at);
    if (!region) return Error("runtime.pclntab points outside the file's segments");
    table = region->bytes.subspan(*at - region->vaddr);
    table_vaddr = *at;
    found_by_ = Found::kSymbol;
  } else if (elf.section_count() != 0 && !looks_like_go(elf)) {
    // With section headers present and none of Go's, this is not a Go binary: scanning a large
    // C binary (100 MB for node) for a magic it cannot contain is not worth it.
    return Error("no Go pclntab (no .gopclntab section or runtime.pclntab symbol)");
  } else {
    auto offset = find_pclntab_by_magic(elf.bytes());
    if (!offset) return Error("no Go pclntab (not a Go binary, or built without one)");
    table = elf.bytes().subspan(*offset);
    found_by_ = Found::kMagicScan;
    for (size_t i = 0; i < elf.segment_count(); ++i) {
      symbols::ElfSegment s = elf.segment(i);
      if (s.type == PT_LOAD && *offset >= s.offset && *offset - s.offset < s.filesz) {
        table_vaddr = s.vaddr + (*offset - s.offset);
      }
    }
  }

  GoPclntabOptions options;
  options.build_index = false;
  ASSIGN_OR_RETURN(GoPclntab probe, GoPclntab::parse(table, options));

  std::optional<GoModuleData> md;
  if (probe.layout() >= GoPclntabLayout::kGo118) {
    md = module_data(elf, table, table_vaddr);
    const uint64_t header = probe.header_text_start();
    if (md && header != 0 && md->text != header) {
      return Error("Go text start disagrees: the table's header says " + hex(header) +
                   ", the module data " + hex(md->text));
    }
    if (md) {
      options.text_start = md->text;
      text_from_ = TextFrom::kModuleData;
    } else if (header != 0) {
      options.text_start = header;
      text_from_ = TextFrom::kHeader;
    } else {
      return Error(
          "Go function table with text start 0 in its header (as Go 1.26+ writes it) and no "
          "module data found: function addresses unknown");
    }
  }

  if (auto built = go_build_version(elf); built.ok()) {
    version_ = std::move(built).value();
    version_from_build_info_ = true;
  } else {
    version_ = go_version_from_pclntab(probe.layout(), probe.header_text_start());
  }

  options.build_index = wanted.build_index;
  if (wanted.inline_trees) {
    // Inline trees live next to the table (.rodata is in the same read-only segment).
    if (auto region = segment_region(elf, table_vaddr)) options.funcdata = *region;
    if (probe.layout() >= GoPclntabLayout::kGo118) {
      std::optional<uint64_t> gofunc = symbol_value(elf, "go:func.*");
      if (!gofunc) gofunc = symbol_value(elf, "go.func.*");
      if (!gofunc) {
        if (auto s = present_section(elf, ".go.func")) gofunc = s->addr;
      }
      if (!gofunc && md && in_read_only_data(elf, md->gofunc)) gofunc = md->gofunc;
      if (gofunc) {
        if (auto region = segment_region(elf, *gofunc)) options.funcdata = *region;
        options.gofunc = *gofunc;
        inline_trees_ = true;
      } else {
        options.funcdata = {};
      }
    } else {
      inline_trees_ = probe.layout() == GoPclntabLayout::kGo116 && !options.funcdata.bytes.empty();
    }
  }
  ASSIGN_OR_RETURN(GoPclntab parsed, GoPclntab::parse(table, options));
  table_.emplace(parsed);
  return ok_status();
}

}  // namespace sonde::symbolize
