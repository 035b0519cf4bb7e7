#include "agent/symbolize/go_build_info.h"

#include <elf.h>

#include <cstring>

#include "common/dotted_version.h"

namespace sonde::symbolize {
namespace {

constexpr std::string_view kMagic = "\xff Go buildinf:";
constexpr size_t kHeaderSize = 32;
constexpr uint8_t kFlagBigEndian = 1;
constexpr uint8_t kFlagInlineStrings = 2;
// Longer than any real toolchain version string: a bound on what a hostile file can claim.
constexpr uint64_t kMaxVersionLength = 256;

// An unsigned LEB128 varint at data[pos], advancing pos.
std::optional<uint64_t> read_varint(std::span<const uint8_t> data, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && pos < data.size(); shift += 7) {
    uint8_t b = data[pos++];
    v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return v;
  }
  return std::nullopt;
}

uint64_t read_uint(const uint8_t* p, size_t size, bool big_endian) {
  uint64_t v = 0;
  for (size_t i = 0; i < size; ++i) {
    size_t k = big_endian ? i : size - 1 - i;
    v = (v << 8) | p[k];
  }
  return v;
}

// The file bytes [vaddr, vaddr + size) through the PT_LOAD segment holding them.
std::optional<std::span<const uint8_t>> bytes_at(const symbols::ElfFile& elf, uint64_t vaddr,
                                                 uint64_t size) {
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    auto seg = elf.segment(i);
    if (seg.type != PT_LOAD || vaddr < seg.vaddr || vaddr - seg.vaddr > seg.filesz ||
        size > seg.filesz - (vaddr - seg.vaddr)) {
      continue;
    }
    uint64_t off = seg.offset + (vaddr - seg.vaddr);
    if (off > elf.bytes().size() || size > elf.bytes().size() - off) return std::nullopt;
    return elf.bytes().subspan(off, size);
  }
  return std::nullopt;
}

}  // namespace

std::optional<GoVersion> parse_go_version(std::string_view text) {
  if (!text.starts_with("go")) return std::nullopt;
  auto v = parse_dotted_version(text.substr(2));
  if (!v) return std::nullopt;
  return GoVersion{v->major, v->minor, v->patch, std::string(text)};
}

Result<GoVersion> go_build_version(const symbols::ElfFile& elf) {
  auto section = elf.find_section(".go.buildinfo");
  if (!section) return Error("no .go.buildinfo section (not a Go binary, or Go older than 1.13)");
  if (section->offset > elf.bytes().size() ||
      section->size > elf.bytes().size() - section->offset || section->size < kHeaderSize) {
    return Error(".go.buildinfo: section out of bounds or too small");
  }
  auto data = elf.bytes().subspan(section->offset, section->size);
  if (std::memcmp(data.data(), kMagic.data(), kMagic.size()) != 0) {
    return Error(".go.buildinfo: bad magic");
  }
  uint8_t ptr_size = data[14];
  uint8_t flags = data[15];
  std::string text;
  if (flags & kFlagInlineStrings) {
    size_t pos = kHeaderSize;
    auto len = read_varint(data, pos);
    if (!len || *len > kMaxVersionLength || *len > data.size() - pos) {
      return Error(".go.buildinfo: bad version length");
    }
    text.assign(reinterpret_cast<const char*>(data.data() + pos), *len);
  } else {
    if (ptr_size != 4 && ptr_size != 8) return Error(".go.buildinfo: bad pointer size");
    bool be = flags & kFlagBigEndian;
    // The version's string header: {data pointer, length}.
    uint64_t header_addr = read_uint(data.data() + 16, ptr_size, be);
    auto header = bytes_at(elf, header_addr, uint64_t{2} * ptr_size);
    if (!header) return Error(".go.buildinfo: version string header outside the file");
    uint64_t str_addr = read_uint(header->data(), ptr_size, be);
    uint64_t len = read_uint(header->data() + ptr_size, ptr_size, be);
    if (len > kMaxVersionLength) return Error(".go.buildinfo: bad version length");
    auto str = bytes_at(elf, str_addr, len);
    if (!str) return Error(".go.buildinfo: version string outside the file");
    text.assign(reinterpret_cast<const char*>(str->data()), str->size());
  }
  auto v = parse_go_version(text);
  if (!v) return Error(".go.buildinfo: unrecognized version \"" + text + "\"");
  return *v;
}

GoVersion go_version_from_pclntab(GoPclntabLayout layout, uint64_t header_text_start) {
  using L = GoPclntabLayout;
  const char* const suffix = " (from .gopclntab; no .go.buildinfo)";
  switch (layout) {
    case L::kGo12: return {1, 2, 0, std::string("go1.2-1.15") + suffix};
    case L::kGo116: return {1, 16, 0, std::string("go1.16 or go1.17") + suffix};
    case L::kGo118: return {1, 18, 0, std::string("go1.18-1.19") + suffix};
    case L::kGo120:
      if (header_text_start == 0) return {1, 26, 0, std::string("go1.26+") + suffix};
      return {1, 20, 0, std::string("go1.20-1.25") + suffix};
  }
  return {1, 2, 0, std::string("go1.2+") + suffix};
}

bool go_register_abi(symbols::Machine machine, const GoVersion& v) {
  auto at_least = [&](int minor) { return v.major > 1 || (v.major == 1 && v.minor >= minor); };
  switch (machine) {
    case symbols::Machine::kX86_64: return at_least(17);
    case symbols::Machine::kAarch64: return at_least(18);
    default: return false;
  }
}

}  // namespace sonde::symbolize
