#include "agent/stacks/vdso.h"

#include <elf.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "agent/stacks/stack_symbolizer.h"
#include "agent/symbols/elf_file.h"

namespace sonde::agent::stacks {

Result<Vdso> Vdso::own() {
  const uint64_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return Error("no vDSO in this process (AT_SYSINFO_EHDR)");
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    auto m = parse_maps_line(line);
    if (!m || m->path != "[vdso]" || m->start != base) continue;
    const uint64_t size = m->end - m->start;
    if (size == 0 || size > kMaxImageBytes) return Error("vDSO of an unexpected size");
    std::vector<uint8_t> image(size);
    std::memcpy(image.data(),
                reinterpret_cast<const void*>(base),  // NOLINT(performance-no-int-to-ptr)
                size);
    return from_image(std::move(image));
  }
  return Error("the vDSO at AT_SYSINFO_EHDR is not in /proc/self/maps");
}

Result<Vdso> Vdso::from_image(std::vector<uint8_t> image) {
  Vdso v;
  v.image_ = std::move(image);
  ASSIGN_OR_RETURN(auto elf, symbols::ElfFile::parse(v.image_));
  ASSIGN_OR_RETURN(auto table, elf.symbol_table(SHT_DYNSYM));
  if (!table) return Error("vDSO without .dynsym");
  // A symbol's value is its link-time address; the image is mapped whole, so the offset from
  // its start is the address through the PT_LOAD segment that holds it.
  std::vector<symbols::ElfSegment> loads;
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    if (elf.segment(i).type == PT_LOAD) loads.push_back(elf.segment(i));
  }
  struct Candidate {
    Function f;
    bool global;
  };
  std::vector<Candidate> all;
  for (size_t i = 0; i < table->size(); ++i) {
    const symbols::ElfSymbol s = table->symbol(i);
    if (s.type() != STT_FUNC || s.size == 0) continue;
    auto name = table->name(s.name_offset);
    if (!name || name->empty()) continue;
    for (const auto& seg : loads) {
      if (s.value >= seg.vaddr && s.value - seg.vaddr < seg.filesz) {
        const uint64_t start = s.value - seg.vaddr + seg.offset;
        all.push_back({{start, start + s.size, std::string(*name)}, s.binding() == STB_GLOBAL});
        break;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.f.start != b.f.start) return a.f.start < b.f.start;
    return a.global > b.global;  // the global name first among aliases
  });
  for (auto& c : all) {
    if (!v.functions_.empty() && v.functions_.back().start == c.f.start) continue;
    v.functions_.push_back(std::move(c.f));
  }
  if (v.functions_.empty()) return Error("vDSO without functions");
  return v;
}

bool Vdso::same_image(std::span<const uint8_t> other) const {
  return other.size() == image_.size() && std::equal(other.begin(), other.end(), image_.begin());
}

std::optional<std::string_view> Vdso::function_at(uint64_t offset) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), offset,
                             [](uint64_t o, const Function& f) { return o < f.start; });
  if (it == functions_.begin()) return std::nullopt;
  --it;
  if (offset >= it->end) return std::nullopt;
  return it->name;
}

}  // namespace sonde::agent::stacks
