#include "agent/symbolize/go_binary.h"

#include <elf.h>

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

}  // namespace

Result<std::unique_ptr<GoBinary>> GoBinary::open(const std::string& path) {
  std::unique_ptr<GoBinary> self(new GoBinary());
  RETURN_IF_ERROR(symbols::map_elf(path, self->file_, self->elf_, [&] { return self->locate(); }));
  return self;
}

Result<std::unique_ptr<GoBinary>> GoBinary::from_bytes(std::span<const uint8_t> bytes) {
  std::unique_ptr<GoBinary> self(new GoBinary());
  RETURN_IF_ERROR(symbols::parse_elf(bytes, self->elf_, [&] { return self->locate(); }));
  return self;
}

Status GoBinary::locate() {
  const symbols::ElfFile& elf = *elf_;
  std::span<const uint8_t> table;
  uint64_t table_vaddr = 0;

  std::optional<symbols::ElfSection> section = elf.find_section(".gopclntab");
  if (!section) section = elf.find_section(".data.rel.ro.gopclntab");
  if (section && section->type != SHT_NOBITS) {
    table = elf.bytes().subspan(section->offset, section->size);
    table_vaddr = section->addr;
    found_by_ = Found::kSection;
  } else if (auto at = symbol_value(elf, "runtime.pclntab")) {
    auto region = segment_region(elf, *at);
    if (!region) return Error("runtime.pclntab points outside the file's segments");
    table = region->bytes.subspan(*at - region->vaddr);
    table_vaddr = *at;
    found_by_ = Found::kSymbol;
  } else if (elf.section_count() != 0) {
    // With section headers present, a Go binary names its table; scanning a large C binary
    // (100 MB for node) for a magic it cannot contain is not worth it.
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
  if (auto text = elf.find_section(".text")) options.text_start = text->addr;
  // Inline trees live next to the table (.rodata is in the same read-only segment).
  if (auto region = segment_region(elf, table_vaddr)) options.funcdata = *region;

  ASSIGN_OR_RETURN(GoPclntab probe, GoPclntab::parse(table, options));
  if (probe.layout() >= GoPclntabLayout::kGo118) {
    std::optional<uint64_t> gofunc = symbol_value(elf, "go:func.*");
    if (!gofunc) gofunc = symbol_value(elf, "go.func.*");
    if (!gofunc && table_vaddr != 0) {
      for (size_t i = 0; i < elf.segment_count() && !gofunc; ++i) {
        symbols::ElfSegment s = elf.segment(i);
        if (s.type != PT_LOAD || (s.flags & PF_W) == 0) continue;
        auto md = find_go_moduledata(table, table_vaddr,
                                     {elf.bytes().subspan(s.offset, s.filesz), s.vaddr});
        if (md) gofunc = md->gofunc;
      }
    }
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
  ASSIGN_OR_RETURN(GoPclntab parsed, GoPclntab::parse(table, options));
  table_.emplace(parsed);
  return ok_status();
}

}  // namespace sonde::symbolize
