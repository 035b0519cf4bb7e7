#include "agent/symbolize/go_pclntab.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "agent/symbols/limits.h"

namespace sonde::symbolize {
namespace {

constexpr uint32_t kMagicGo12 = 0xfffffffb;
constexpr uint32_t kMagicGo116 = 0xfffffffa;
constexpr uint32_t kMagicGo118 = 0xfffffff0;
constexpr uint32_t kMagicGo120 = 0xfffffff1;

// Indexes into a function's pcdata/funcdata arrays, stable since Go 1.16 (the 1.2 layout spans
// Go 1.2-1.15, whose indexes moved between releases, so its inline trees are not read).
constexpr size_t kPcdataInlTreeIndex = 2;
constexpr size_t kFuncdataInlTree = 3;
// runtime.inlinedCall: 20 bytes up to Go 1.19 (parentPc at 16), 16 bytes from 1.20 (parentPc at
// 8); the callee's name offset sits at 12 and 4 respectively.
constexpr size_t kInlinedCallSize119 = 20;
constexpr size_t kInlinedCallSize120 = 16;
// Deeper inline chains than this do not come out of the Go compiler (its inlining budget stops
// far earlier); the bound keeps a corrupt tree that points back at itself from looping.
constexpr size_t kMaxInlineDepth = 64;

// Every this many steps of a long pc-value table the index keeps the decoder's state, so a
// lookup walks at most this many steps (instead of up to thousands in large functions) at 12
// bytes per checkpoint.
constexpr uint32_t kCheckpointStride = 16;
// Function lookup buckets cover 4 KiB of text each (the runtime's findfunctab uses the same
// granularity); a table spanning more than 2^24 buckets (64 GiB) gets none.
constexpr unsigned kBucketShift = 12;
constexpr uint64_t kMaxBuckets = uint64_t{1} << 24;

// Word index of moduledata.minpc, .text and .gofunc (runtime/symtab.go): 1.20 inserted
// covctrs/ecovctrs before `end`, shifting gofunc by two words. minpc and text hold their places
// from 1.18 to 1.27 (checked on real binaries of each); gofunc moved again in 1.27 (word 39 there,
// the .go.func section), which is why GoBinary prefers the symbol or that section.
constexpr size_t kModuledataMinpc = 20;
constexpr size_t kModuledataText = 22;
constexpr size_t kModuledataGofunc118 = 38;
constexpr size_t kModuledataGofunc120 = 40;

struct Header {
  GoPclntabLayout layout;
  bool big_endian;
};

std::optional<Header> sniff_header(std::span<const uint8_t> d) {
  if (d.size() < 16 || d[4] != 0 || d[5] != 0) return std::nullopt;
  if (d[6] != 1 && d[6] != 2 && d[6] != 4) return std::nullopt;
  if (d[7] != 4 && d[7] != 8) return std::nullopt;
  uint32_t le = uint32_t{d[0]} | uint32_t{d[1]} << 8 | uint32_t{d[2]} << 16 | uint32_t{d[3]} << 24;
  uint32_t be = uint32_t{d[3]} | uint32_t{d[2]} << 8 | uint32_t{d[1]} << 16 | uint32_t{d[0]} << 24;
  for (bool big : {false, true}) {
    switch (big ? be : le) {
      case kMagicGo12: return Header{GoPclntabLayout::kGo12, big};
      case kMagicGo116: return Header{GoPclntabLayout::kGo116, big};
      case kMagicGo118: return Header{GoPclntabLayout::kGo118, big};
      case kMagicGo120: return Header{GoPclntabLayout::kGo120, big};
      default: break;
    }
  }
  return std::nullopt;
}

// The magic of a header that has the pclntab's shape (0xfffffff? in either byte order, zero pad,
// a valid quantum and pointer size) but none of the known layouts.
std::optional<uint32_t> unknown_layout_magic(std::span<const uint8_t> d) {
  if (d.size() < 16 || d[4] != 0 || d[5] != 0) return std::nullopt;
  if ((d[6] != 1 && d[6] != 2 && d[6] != 4) || (d[7] != 4 && d[7] != 8)) return std::nullopt;
  uint32_t le = uint32_t{d[0]} | uint32_t{d[1]} << 8 | uint32_t{d[2]} << 16 | uint32_t{d[3]} << 24;
  uint32_t be = uint32_t{d[3]} | uint32_t{d[2]} << 8 | uint32_t{d[1]} << 16 | uint32_t{d[0]} << 24;
  if ((le & 0xfffffff0) == 0xfffffff0) return le;
  if ((be & 0xfffffff0) == 0xfffffff0) return be;
  return std::nullopt;
}

uint64_t load(const uint8_t* p, size_t width, bool big_endian) {
  uint64_t v = 0;
  if (big_endian) {
    for (size_t i = 0; i < width; ++i) v = (v << 8) | p[i];
  } else {
    for (size_t i = width; i > 0; --i) v = (v << 8) | p[i - 1];
  }
  return v;
}

}  // namespace

// A runtime._func record whose fixed part was checked to lie inside the table.
struct GoPclntab::Func {
  uint32_t index;  // in the functab
  uint64_t entry;
  uint32_t nameoff;
  uint32_t pcfile;
  uint32_t pcln;
  uint32_t npcdata;
  uint32_t cu_offset;
  uint32_t nfuncdata;
  size_t pcdata;  // offset of the pcdata array that follows the fixed part
};

uint64_t GoPclntab::read_uint(size_t offset, size_t width, bool* ok) const {
  if (offset > data_.size() || width > data_.size() - offset) {
    *ok = false;
    return 0;
  }
  return load(data_.data() + offset, width, big_endian_);
}

Result<GoPclntab> GoPclntab::parse(std::span<const uint8_t> table,
                                   const GoPclntabOptions& options) {
  auto header = sniff_header(table);
  if (!header) {
    // A header of the known shape whose magic is not one of the four: a Go release newer than
    // this reader, whose layout must not be guessed at.
    if (auto magic = unknown_layout_magic(table)) {
      char hex[16];
      (void)std::snprintf(hex, sizeof(hex), "0x%08x", *magic);
      return Error(std::string("gopclntab: layout not known to this agent (magic ") + hex +
                   ", a Go release newer than 1.27?)");
    }
    return Error("gopclntab: no Go 1.2/1.16/1.18/1.20 pclntab header");
  }
  // Callers that found the table by symbol or magic pass everything up to the end of its
  // segment or file; only the first kMaxPclntabBytes are read, and a table reaching past
  // them gets the "too large" verdict below.
  const bool clamped = table.size() > symbols::kMaxPclntabBytes;
  if (clamped) table = table.first(symbols::kMaxPclntabBytes);
  GoPclntab t;
  t.data_ = table;
  t.options_ = options;
  t.layout_ = header->layout;
  t.big_endian_ = header->big_endian;
  t.quantum_ = table[6];
  t.ptr_size_ = table[7];

  bool ok = true;
  auto word = [&](size_t i) { return t.read_uint(8 + i * t.ptr_size_, t.ptr_size_, &ok); };
  uint64_t nfunc = word(0);
  uint64_t nfiles = 0;
  uint64_t offsets[5] = {};  // funcname, cutab, filetab, pctab, funcdata
  switch (t.layout_) {
    case GoPclntabLayout::kGo118:
    case GoPclntabLayout::kGo120:
      nfiles = word(1);
      t.header_text_start_ = word(2);
      t.text_start_ = options.text_start != 0 ? options.text_start : t.header_text_start_;
      for (size_t i = 0; i < 5; ++i) offsets[i] = word(3 + i);
      t.functab_field_ = 4;
      break;
    case GoPclntabLayout::kGo116:
      nfiles = word(1);
      for (size_t i = 0; i < 5; ++i) offsets[i] = word(2 + i);
      t.functab_field_ = t.ptr_size_;
      break;
    case GoPclntabLayout::kGo12:
      // Everything is addressed from the start of the table; the functab follows nfunc.
      t.functab_field_ = t.ptr_size_;
      offsets[4] = 0;
      break;
  }
  if (!ok) return Error("gopclntab: header truncated");
  for (uint64_t off : offsets) {
    if (off >= table.size() && clamped) {
      return symbols::too_large_error("gopclntab bytes", off, symbols::kMaxPclntabBytes);
    }
    if (off >= table.size()) return Error("gopclntab: header offset beyond the table");
  }
  t.funcname_ = offsets[0];
  t.cutab_ = offsets[1];
  t.filetab_ = offsets[2];
  t.pctab_ = offsets[3];
  t.funcdata_ = offsets[4];
  t.functab_ = t.layout_ == GoPclntabLayout::kGo12 ? 8 + size_t{t.ptr_size_} : t.funcdata_;

  if (nfunc == 0) return Error("gopclntab: table lists no functions");
  // (2n+1) entries of functab_field_ bytes must fit; checked in 64 bits before any multiply
  // could overflow.
  if (nfunc > table.size() || (2 * nfunc + 1) * t.functab_field_ > table.size() - t.functab_) {
    if (clamped) {
      return symbols::too_large_error("gopclntab function count", nfunc, symbols::kMaxGoFunctions);
    }
    return Error("gopclntab: function table larger than the section");
  }
  if (nfunc > symbols::kMaxGoFunctions) {
    return symbols::too_large_error("gopclntab function count", nfunc, symbols::kMaxGoFunctions);
  }
  t.nfunc_ = static_cast<uint32_t>(nfunc);
  if (t.layout_ == GoPclntabLayout::kGo12) {
    size_t end = t.functab_ + (2 * nfunc + 1) * t.functab_field_;
    uint64_t fileoff = t.read_uint(end, 4, &ok);
    if (!ok || fileoff >= table.size()) return Error("gopclntab: file table offset invalid");
    t.filetab_ = fileoff;
    nfiles = t.read_uint(fileoff, 4, &ok);
    if (!ok || nfiles > (table.size() - fileoff) / 4) {
      return Error("gopclntab: file table larger than the section");
    }
  }
  if (nfiles > UINT32_MAX) return Error("gopclntab: file count out of range");
  t.nfiles_ = static_cast<uint32_t>(nfiles);

  uint64_t lo = t.functab_pc(0, &ok);
  uint64_t hi = t.functab_pc(t.nfunc_, &ok);
  if (!ok || hi < lo) return Error("gopclntab: function table not sorted by address");
  if (options.build_index) t.build_index();
  return t;
}

uint64_t GoPclntab::functab_pc(uint32_t index, bool* ok) const {
  uint64_t v = read_uint(functab_ + size_t{2} * index * functab_field_, functab_field_, ok);
  if (layout_ >= GoPclntabLayout::kGo118) v += text_start_;
  return v;
}

uint64_t GoPclntab::min_pc() const {
  bool ok = true;
  return functab_pc(0, &ok);
}

uint64_t GoPclntab::max_pc() const {
  bool ok = true;
  return functab_pc(nfunc_, &ok);
}

std::optional<uint32_t> GoPclntab::find_index(uint64_t pc) const {
  bool ok = true;
  if (pc < functab_pc(0, &ok) || pc >= functab_pc(nfunc_, &ok) || !ok) return std::nullopt;
  // Last entry whose pc <= target; the functab ends with a sentinel end pc at index nfunc.
  // The index's buckets narrow the search to the functions overlapping one 4 KiB of text.
  uint32_t lo = 0;
  uint32_t hi = nfunc_;
  if (index_ != nullptr && !index_->buckets.empty()) {
    uint64_t b = (pc - index_->bucket_base) >> kBucketShift;
    if (b < index_->buckets.size()) {
      lo = index_->buckets[b];
      if (b + 1 < index_->buckets.size()) hi = std::min(hi, index_->buckets[b + 1] + 1);
    }
  }
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (functab_pc(mid, &ok) <= pc) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::optional<GoPclntab::Func> GoPclntab::func_at(uint32_t index) const {
  bool ok = true;
  uint64_t funcoff =
      read_uint(functab_ + (size_t{2} * index + 1) * functab_field_, functab_field_, &ok);
  if (!ok || funcoff >= data_.size() - funcdata_) return std::nullopt;
  size_t off = funcdata_ + funcoff;
  // Fixed part of runtime._func: entry (4 bytes from 1.18, a pointer before), then 32-bit
  // fields; 1.16 added cuOffset, 1.20 startLine, each moving the pcdata array back 4 bytes.
  size_t sz0 = layout_ >= GoPclntabLayout::kGo118 ? 4 : ptr_size_;
  size_t fixed = sz0 + 32;
  if (layout_ == GoPclntabLayout::kGo116 || layout_ == GoPclntabLayout::kGo118) fixed = sz0 + 36;
  if (layout_ == GoPclntabLayout::kGo120) fixed = sz0 + 40;
  if (fixed > data_.size() - off) return std::nullopt;

  Func f{};
  f.index = index;
  if (layout_ >= GoPclntabLayout::kGo118) {
    f.entry = read_uint(off, 4, &ok) + text_start_;
  } else {
    f.entry = read_uint(off, ptr_size_, &ok);
  }
  f.nameoff = static_cast<uint32_t>(read_uint(off + sz0, 4, &ok));
  f.pcfile = static_cast<uint32_t>(read_uint(off + sz0 + 16, 4, &ok));
  f.pcln = static_cast<uint32_t>(read_uint(off + sz0 + 20, 4, &ok));
  f.npcdata = static_cast<uint32_t>(read_uint(off + sz0 + 24, 4, &ok));
  if (layout_ != GoPclntabLayout::kGo12) {
    f.cu_offset = static_cast<uint32_t>(read_uint(off + sz0 + 28, 4, &ok));
    f.nfuncdata = data_[off + fixed - 1];
  }
  f.pcdata = off + fixed;
  if (!ok) return std::nullopt;
  return f;
}

// One (value delta, pc delta) step of a pc-value table at data_[*pos]. False at the table's end
// marker or when the bytes run out. Every step consumes at least two bytes, so a walk ends
// within the table even when its pcs never pass the target.
bool GoPclntab::step(size_t* pos, uint32_t* value, uint64_t* cur, bool first) const {
  const uint8_t* p = data_.data() + *pos;
  const uint8_t* end = data_.data() + data_.size();
  auto varint = [&](uint32_t* out) {
    if (p != end && *p < 0x80) {  // most deltas fit one byte
      *out = *p++;
      return true;
    }
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p == end) return false;
      uint8_t b = *p++;
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  };
  uint32_t uv = 0;
  uint32_t pcdelta = 0;
  if (!varint(&uv)) return false;
  if (uv == 0 && !first) return false;
  *value += (uv & 1) ? ~(uv >> 1) : (uv >> 1);  // zig-zag, wrapping like the int32 it encodes
  if (!varint(&pcdelta)) return false;
  *cur += uint64_t{pcdelta} * quantum_;
  *pos = static_cast<size_t>(p - data_.data());
  return true;
}

int32_t GoPclntab::pcvalue(const Func& f, TableKind kind, uint32_t table_offset,
                           uint64_t pc) const {
  // Offset 0 means "no table" (runtime.pcvalue treats it so too).
  if (table_offset == 0 || table_offset >= data_.size() - pctab_) return -1;
  const uint64_t entry = f.entry;
  size_t pos = pctab_ + table_offset;
  uint32_t value = UINT32_MAX;  // -1 in two's complement, the encoding's initial value
  uint64_t cur = entry;
  if (pc >= entry) {
    // The range was built from this same _func record, so it belongs to table_offset.
    if (const Checkpoint* c = checkpoint_for(f.index, kind, pc - entry)) {
      pos = pctab_ + c->pos;
      value = c->value;
      cur = entry + c->pc;
    }
  }
  for (;;) {
    if (!step(&pos, &value, &cur, cur == entry)) return -1;
    if (pc < cur) return static_cast<int32_t>(value);
  }
}

const GoPclntab::Checkpoint* GoPclntab::checkpoint_for(uint32_t func, TableKind kind,
                                                       uint64_t pc_delta) const {
  if (index_ == nullptr) return nullptr;
  const Range& r = index_->ranges[size_t{func} * kTableKinds + static_cast<size_t>(kind)];
  if (r.count == 0) return nullptr;
  auto first = index_->checkpoints.begin() + r.first;
  auto last = first + r.count;
  auto c = std::upper_bound(first, last, pc_delta,
                            [](uint64_t d, const Checkpoint& x) { return d < x.pc; });
  if (c == first) return nullptr;
  return &*(c - 1);
}

void GoPclntab::build_index() {
  if (data_.size() - pctab_ > UINT32_MAX) return;  // checkpoint positions are 32-bit
  auto index = std::make_unique<Index>();

  // Function buckets: for each 4 KiB of text, the first function overlapping it.
  uint64_t lo = min_pc();
  uint64_t hi = max_pc();
  // A real table is far larger than its bucket array (text / 1024 bytes); a corrupt range must
  // not turn into an allocation out of proportion with the input.
  uint64_t nbuckets = ((hi - lo) >> kBucketShift) + 1;
  if (nbuckets < kMaxBuckets && nbuckets * sizeof(uint32_t) <= data_.size()) {
    index->bucket_base = lo;
    index->buckets.resize(nbuckets);
    uint32_t f = 0;
    bool ok = true;
    for (size_t b = 0; b < index->buckets.size(); ++b) {
      uint64_t start = lo + (uint64_t{b} << kBucketShift);
      while (f + 1 < nfunc_ && functab_pc(f + 1, &ok) <= start) ++f;
      index->buckets[b] = f;
    }
  }

  // Every table a lookup walks: pcfile, pcln and the inline-tree index of each function.
  // Identical tables are shared between functions by the linker; each is indexed once.
  // table_of[i * kTableKinds + kind]: the pctab offset of that table of function i (0: none).
  std::vector<uint32_t> table_of(size_t{nfunc_} * kTableKinds);
  for (uint32_t i = 0; i < nfunc_; ++i) {
    auto f = func_at(i);
    if (!f) continue;
    uint32_t* t = &table_of[size_t{i} * kTableKinds];
    t[static_cast<size_t>(TableKind::kFile)] = f->pcfile;
    t[static_cast<size_t>(TableKind::kLine)] = f->pcln;
    if (layout_ != GoPclntabLayout::kGo12 && f->npcdata > kPcdataInlTreeIndex) {
      bool ok = true;
      auto inl = static_cast<uint32_t>(read_uint(f->pcdata + kPcdataInlTreeIndex * 4, 4, &ok));
      if (ok) t[static_cast<size_t>(TableKind::kInline)] = inl;
    }
  }
  std::vector<uint32_t> offsets = table_of;
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());

  std::vector<Range> by_offset(offsets.size());
  // A hostile table could make every offset start a long walk over the same bytes; the budget
  // keeps indexing linear in the table size. Every step consumes at least two bytes, so the
  // distinct tables of a real binary take at most size/2 steps; past the budget, lookups just
  // walk from the start. Checkpoints stay under 0.75 bytes per table byte.
  uint64_t budget = uint64_t{data_.size()};
  for (size_t t = 0; t < offsets.size() && budget > 0; ++t) {
    uint32_t off = offsets[t];
    if (off == 0 || off >= data_.size() - pctab_) continue;
    size_t pos = pctab_ + off;
    uint32_t value = UINT32_MAX;
    uint64_t cur = 0;
    size_t first = index->checkpoints.size();
    uint32_t steps = 0;
    while (budget > 0 && step(&pos, &value, &cur, cur == 0)) {
      --budget;
      if (cur > UINT32_MAX) break;
      if (++steps % kCheckpointStride == 0) {
        index->checkpoints.push_back(
            Checkpoint{static_cast<uint32_t>(cur), value, static_cast<uint32_t>(pos - pctab_)});
      }
    }
    by_offset[t].first = static_cast<uint32_t>(first);
    by_offset[t].count = static_cast<uint32_t>(index->checkpoints.size() - first);
  }
  index->ranges.resize(table_of.size());
  for (size_t i = 0; i < table_of.size(); ++i) {
    auto it = std::lower_bound(offsets.begin(), offsets.end(), table_of[i]);
    index->ranges[i] = by_offset[static_cast<size_t>(it - offsets.begin())];
  }
  index->checkpoints.shrink_to_fit();
  index_ = std::move(index);
}

size_t GoPclntab::index_bytes() const {
  if (index_ == nullptr) return 0;
  return index_->checkpoints.capacity() * sizeof(Checkpoint) +
         index_->ranges.capacity() * sizeof(Range) + index_->buckets.capacity() * sizeof(uint32_t);
}

std::string_view GoPclntab::c_string(size_t base, size_t end, uint64_t offset) const {
  if (base > end || offset >= end - base) return {};
  const char* start = reinterpret_cast<const char*>(data_.data()) + base + offset;
  const void* nul = std::memchr(start, 0, end - base - offset);
  if (nul == nullptr) return {};
  return std::string_view(start, static_cast<const char*>(nul) - start);
}

std::string_view GoPclntab::func_name(uint64_t nameoff) const {
  size_t base = layout_ == GoPclntabLayout::kGo12 ? 0 : funcname_;
  return c_string(base, data_.size(), nameoff);
}

std::string_view GoPclntab::file_name(const Func& f, int32_t file_index) const {
  bool ok = true;
  if (layout_ == GoPclntabLayout::kGo12) {
    if (file_index <= 0 || static_cast<uint32_t>(file_index) >= nfiles_) return {};
    uint64_t off = read_uint(filetab_ + size_t{4} * static_cast<uint32_t>(file_index), 4, &ok);
    return ok ? c_string(0, data_.size(), off) : std::string_view{};
  }
  if (file_index < 0) return {};
  uint64_t slot = uint64_t{f.cu_offset} + static_cast<uint32_t>(file_index);
  if (slot > (data_.size() - cutab_) / 4) return {};
  uint64_t off = read_uint(cutab_ + slot * 4, 4, &ok);
  if (!ok || off == UINT32_MAX) return {};
  return c_string(filetab_, data_.size(), off);
}

GoFrame GoPclntab::frame_at(const Func& f, uint64_t pc, std::string_view function) const {
  GoFrame frame;
  frame.function = function;
  frame.entry = f.entry;
  frame.file = file_name(f, pcvalue(f, TableKind::kFile, f.pcfile, pc));
  int32_t line = pcvalue(f, TableKind::kLine, f.pcln, pc);
  frame.line = line < 0 ? 0 : line;
  return frame;
}

std::optional<GoFrame> GoPclntab::lookup(uint64_t pc) const {
  auto index = find_index(pc);
  if (!index) return std::nullopt;
  auto f = func_at(*index);
  if (!f) return std::nullopt;
  return frame_at(*f, pc, func_name(f->nameoff));
}

std::optional<GoFrame> GoPclntab::function_at(uint32_t index) const {
  if (index >= nfunc_) return std::nullopt;
  auto f = func_at(index);
  if (!f) return std::nullopt;
  GoFrame frame;
  frame.function = func_name(f->nameoff);
  frame.entry = f->entry;
  return frame;
}

size_t GoPclntab::lookup_frames(uint64_t pc, std::span<GoFrame> out) const {
  if (out.empty()) return 0;
  auto index = find_index(pc);
  if (!index) return 0;
  auto f = func_at(*index);
  if (!f) return 0;
  size_t n = 0;
  uint64_t trace_pc = pc;

  // The inline tree of the function, if this layout has one we can read and it was supplied.
  const GoMemoryRegion& region = options_.funcdata;
  uint64_t tree = 0;
  uint32_t tree_pcdata = 0;
  bool ok = true;
  if (layout_ != GoPclntabLayout::kGo12 && !region.bytes.empty() &&
      f->npcdata > kPcdataInlTreeIndex && f->nfuncdata > kFuncdataInlTree) {
    tree_pcdata = static_cast<uint32_t>(read_uint(f->pcdata + kPcdataInlTreeIndex * 4, 4, &ok));
    size_t slots = f->pcdata + size_t{f->npcdata} * 4;
    if (layout_ >= GoPclntabLayout::kGo118) {
      uint64_t off = read_uint(slots + kFuncdataInlTree * 4, 4, &ok);
      if (off != UINT32_MAX) tree = options_.gofunc + off;
    } else {
      // 1.16/1.17 funcdata are pointers, aligned to the pointer size in memory; the section
      // itself is pointer aligned, so aligning the table offset is the same thing.
      slots = (slots + ptr_size_ - 1) & ~(size_t{ptr_size_} - 1);
      tree = read_uint(slots + kFuncdataInlTree * size_t{ptr_size_}, ptr_size_, &ok);
    }
    if (!ok) tree = 0;
  }

  if (tree != 0) {
    size_t call_size =
        layout_ == GoPclntabLayout::kGo120 ? kInlinedCallSize120 : kInlinedCallSize119;
    size_t name_at = layout_ == GoPclntabLayout::kGo120 ? 4 : 12;
    size_t parent_pc_at = layout_ == GoPclntabLayout::kGo120 ? 8 : 16;
    for (size_t depth = 0; depth < kMaxInlineDepth && n < out.size(); ++depth) {
      int32_t ix = pcvalue(*f, TableKind::kInline, tree_pcdata, trace_pc);
      if (ix < 0) break;
      uint64_t at = tree + static_cast<uint64_t>(ix) * call_size;
      if (at < region.vaddr || at - region.vaddr > region.bytes.size() ||
          call_size > region.bytes.size() - (at - region.vaddr)) {
        break;
      }
      const uint8_t* call = region.bytes.data() + (at - region.vaddr);
      uint64_t nameoff = load(call + name_at, 4, big_endian_);
      auto parent_pc = static_cast<int32_t>(load(call + parent_pc_at, 4, big_endian_));
      out[n] = frame_at(*f, trace_pc, func_name(nameoff));
      out[n].inlined = true;
      ++n;
      if (parent_pc < 0) break;
      trace_pc = f->entry + static_cast<uint64_t>(parent_pc);
    }
  }
  if (n < out.size()) out[n++] = frame_at(*f, trace_pc, func_name(f->nameoff));
  return n;
}

std::optional<size_t> find_pclntab_by_magic(std::span<const uint8_t> bytes) {
  if (bytes.size() > symbols::kMaxMagicScanBytes) bytes = bytes.first(symbols::kMaxMagicScanBytes);
  for (size_t i = 0; i + 16 <= bytes.size(); ++i) {
    // Cheap filter first: every magic has 0xff in its two middle bytes and two zero pad bytes.
    if (bytes[i + 1] != 0xff || bytes[i + 2] != 0xff || bytes[i + 4] != 0 || bytes[i + 5] != 0) {
      continue;
    }
    if (!sniff_header(bytes.subspan(i))) continue;
    GoPclntabOptions probe;
    probe.build_index = false;
    if (GoPclntab::parse(bytes.subspan(i), probe).ok()) return i;
  }
  return std::nullopt;
}

std::optional<GoModuleData> find_go_moduledata(std::span<const uint8_t> table, uint64_t table_vaddr,
                                               GoMemoryRegion data) {
  GoPclntabOptions probe;
  probe.build_index = false;
  auto parsed = GoPclntab::parse(table, probe);
  if (!parsed.ok() || parsed->layout() < GoPclntabLayout::kGo118) return std::nullopt;
  auto header = sniff_header(table);
  size_t ptr = table[7];
  bool big = header->big_endian;
  size_t gofunc_word =
      parsed->layout() == GoPclntabLayout::kGo120 ? kModuledataGofunc120 : kModuledataGofunc118;
  size_t record = (gofunc_word + 1) * ptr;
  uint64_t funcname_offset = load(table.data() + 8 + 3 * ptr, ptr, big);
  // The first function's offset from the text start (its entry is minpc = text + offset).
  uint64_t first_offset = parsed->min_pc() - parsed->header_text_start();
  // The module data is pointer aligned in memory: start at the first aligned address.
  size_t first = static_cast<size_t>((ptr - data.vaddr % ptr) % ptr);
  for (size_t i = first; record <= data.bytes.size() && i <= data.bytes.size() - record; i += ptr) {
    const uint8_t* p = data.bytes.data() + i;
    if (load(p, ptr, big) != table_vaddr) continue;
    // moduledata.funcnametab.ptr and minpc repeat what the table says: a stray pointer to the
    // header elsewhere in the data will not match both. (The header's own textStart is not
    // compared: Go 1.26 and later write 0 there, and moduledata.text is what the runtime uses.)
    if (load(p + ptr, ptr, big) != table_vaddr + funcname_offset) continue;
    uint64_t text = load(p + kModuledataText * ptr, ptr, big);
    if (text == 0 || load(p + kModuledataMinpc * ptr, ptr, big) != text + first_offset) continue;
    return GoModuleData{data.vaddr + i, text, load(p + gofunc_word * ptr, ptr, big)};
  }
  return std::nullopt;
}

std::optional<GoPclntab::FunctionRange> GoPclntab::find_function(std::string_view name) const {
  for (uint32_t i = 0; i < nfunc_; ++i) {
    auto f = func_at(i);
    if (!f || func_name(f->nameoff) != name) continue;
    bool ok = true;
    uint64_t end = functab_pc(i + 1, &ok);
    if (!ok || end <= f->entry) return std::nullopt;
    return FunctionRange{f->entry, end};
  }
  return std::nullopt;
}

}  // namespace sonde::symbolize
