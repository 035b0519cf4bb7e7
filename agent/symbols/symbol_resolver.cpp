#include "agent/symbols/symbol_resolver.h"

#include <elf.h>

#include <algorithm>
#include <bitset>
#include <cstring>
#include <memory>

namespace sonde::symbols {
namespace {

// The first two bytes of a NUL-terminated name as a 16-bit key (the second byte is 0 for
// one-character names). A bitmap of the wanted keys rejects almost every symbol of a large
// binary after two byte loads, before any string comparison.
uint16_t prefix_key(const uint8_t* name, size_t room) {
  const uint16_t first = name[0];
  const uint16_t second = (first != 0 && room > 1) ? name[1] : 0;
  return static_cast<uint16_t>(first | (second << 8));
}

constexpr size_t kPrefetchDistance = 32;

struct Wanted {
  std::string_view name;
  uint16_t key = 0;
  size_t slot = 0;  // index into the unique results
};

struct Match {
  bool found = false;
  bool ambiguous = false;
  uint64_t address = 0;
  uint64_t size = 0;
};

class Matcher {
 public:
  explicit Matcher(std::span<const std::string> names) {
    wanted_.reserve(names.size());
    for (const auto& n : names) {
      if (n.empty()) continue;
      const auto* p = reinterpret_cast<const uint8_t*>(n.c_str());
      wanted_.push_back(Wanted{n, prefix_key(p, n.size() + 1), 0});
    }
    std::sort(wanted_.begin(), wanted_.end(),
              [](const Wanted& a, const Wanted& b) { return a.name < b.name; });
    wanted_.erase(std::unique(wanted_.begin(), wanted_.end(),
                              [](const Wanted& a, const Wanted& b) { return a.name == b.name; }),
                  wanted_.end());
    for (size_t i = 0; i < wanted_.size(); ++i) {
      wanted_[i].slot = i;
      keys_->set(wanted_[i].key);
    }
    matches_.resize(wanted_.size());
  }

  // Visits every defined function symbol of table once; no allocation.
  void scan(const SymbolTable& table) {
    const auto strings = table.strings();
    const size_t count = table.size();
    for (size_t i = 1; i < count; ++i) {
      // Names are scattered over a multi-megabyte string table and the first-byte load of
      // each one misses the cache; asking for a name a few entries ahead overlaps the misses.
      if (i + kPrefetchDistance < count) {
        const uint32_t ahead = table.symbol(i + kPrefetchDistance).name_offset;
        if (ahead < strings.size()) __builtin_prefetch(strings.data() + ahead);
      }
      const ElfSymbol sym = table.symbol(i);
      if ((sym.type() != STT_FUNC && sym.type() != STT_OBJECT) || sym.section_index == SHN_UNDEF) {
        continue;
      }
      if (sym.name_offset == 0 || sym.name_offset >= strings.size()) continue;
      const uint8_t* name = strings.data() + sym.name_offset;
      const size_t room = strings.size() - sym.name_offset;
      const uint16_t key = prefix_key(name, room);
      if (!keys_->test(key)) continue;
      for (const Wanted& w : wanted_) {
        if (w.key != key || w.name.size() >= room) continue;
        if (name[w.name.size()] != 0 || std::memcmp(name, w.name.data(), w.name.size()) != 0) {
          continue;
        }
        Match& m = matches_[w.slot];
        if (!m.found) {
          m = Match{true, false, sym.value, sym.size};
        } else if (m.address != sym.value) {
          m.ambiguous = true;
        }
        break;
      }
    }
  }

  // The match for name, which was one of the constructor's names.
  const Match* find(std::string_view name) const {
    auto it = std::lower_bound(wanted_.begin(), wanted_.end(), name,
                               [](const Wanted& w, std::string_view n) { return w.name < n; });
    if (it == wanted_.end() || it->name != name) return nullptr;
    return &matches_[it->slot];
  }

 private:
  std::vector<Wanted> wanted_;
  // 8 KiB: on the heap once per resolve rather than on a thread's stack.
  std::unique_ptr<std::bitset<65536>> keys_ = std::make_unique<std::bitset<65536>>();
  std::vector<Match> matches_;
};

ProbeTarget describe(const ElfFile& elf, const std::string& name, const Match* match) {
  ProbeTarget t;
  t.name = name;
  if (match == nullptr || !match->found) return t;
  t.found = true;
  t.ambiguous = match->ambiguous;
  t.address = match->address;
  t.size = match->size;
  auto offset = elf.file_offset_of(match->address);
  if (!offset.ok() || match->size == 0) {
    t.return_status = ReturnSiteStatus::kNotCode;
    return t;
  }
  t.file_offset = *offset;
  auto code = elf.code_at(match->address, match->size);
  if (!code.ok()) {
    t.return_status = ReturnSiteStatus::kNotCode;
    return t;
  }
  ReturnSites sites = find_return_sites(elf.machine(), *code, match->address);
  t.return_status = sites.status;
  t.return_offsets = std::move(sites.returns);
  t.exit_jump_offsets = std::move(sites.exit_jumps);
  t.return_offsets.shrink_to_fit();
  t.exit_jump_offsets.shrink_to_fit();
  return t;
}

}  // namespace

Result<std::vector<ProbeTarget>> resolve(const ElfFile& elf, std::span<const std::string> names) {
  Matcher matcher(names);
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    ASSIGN_OR_RETURN(auto table, elf.symbol_table(type));
    if (table) matcher.scan(*table);
  }
  std::vector<ProbeTarget> out;
  out.reserve(names.size());
  for (const auto& name : names) out.push_back(describe(elf, name, matcher.find(name)));
  return out;
}

Result<std::vector<ProbeTarget>> resolve_file(const std::string& path,
                                              std::span<const std::string> names) {
  ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  auto elf = ElfFile::parse(mapping.bytes());
  if (!elf.ok()) return elf.error().wrap(path);
  auto targets = resolve(*elf, names);
  if (!targets.ok()) return targets.error().wrap(path);
  RETURN_IF_ERROR(mapping.check(path));
  return targets;
}

}  // namespace sonde::symbols
