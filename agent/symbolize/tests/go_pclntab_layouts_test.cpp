// GoPclntab on hand-assembled tables of every layout (1.2, 1.16, 1.18, 1.20), both byte orders
// and pointer sizes: Debian's Go 1.19 only writes the 1.18 layout, so the others are encoded
// here from the layout descriptions in Go's runtime/symtab.go, runtime2.go and debug/gosym.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "agent/symbolize/go_pclntab.h"

namespace sonde::symbolize {
namespace {

constexpr uint64_t kText = 0x401000;

struct Buf {
  std::vector<uint8_t> bytes;
  bool big = false;
  size_t ptr = 8;

  void put(uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) {
      size_t shift = big ? (width - 1 - i) * 8 : i * 8;
      bytes.push_back(static_cast<uint8_t>(v >> shift));
    }
  }
  void patch(size_t at, uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) {
      size_t shift = big ? (width - 1 - i) * 8 : i * 8;
      bytes[at + i] = static_cast<uint8_t>(v >> shift);
    }
  }
  void u32(uint64_t v) { put(v, 4); }
  void uptr(uint64_t v) { put(v, ptr); }
  size_t str(const std::string& s) {
    size_t at = bytes.size();
    bytes.insert(bytes.end(), s.begin(), s.end());
    bytes.push_back(0);
    return at;
  }
  void align(size_t a) {
    while (bytes.size() % a) bytes.push_back(0);
  }
};

void varint(std::vector<uint8_t>& out, uint32_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

// A pc-value table: (value, end pc offset) runs, quantum 1.
std::vector<uint8_t> pcvalue_table(const std::vector<std::pair<int32_t, uint32_t>>& runs) {
  std::vector<uint8_t> out;
  int32_t prev = -1;
  uint32_t pc = 0;
  for (auto [value, end] : runs) {
    int32_t d = value - prev;
    varint(out, d < 0 ? (static_cast<uint32_t>(~d) << 1) | 1 : static_cast<uint32_t>(d) << 1);
    varint(out, end - pc);
    prev = value;
    pc = end;
  }
  out.push_back(0);
  return out;
}

struct FuncSpec {
  std::string name;
  uint32_t start, end;  // offsets from kText
  std::vector<std::pair<int32_t, uint32_t>> lines;
  int32_t file;  // index of the file within the function's CU (1.16+) / file table (1.2)
};

struct Built {
  std::vector<uint8_t> table;
  std::vector<uint8_t> gofunc;  // inline trees region (1.18+)
};

// Two functions; `alpha` has an inlined call of `gamma` at [0x20, 0x30) whose call site is at
// alpha+0x18, recorded for the 1.16+ layouts.
Built build(GoPclntabLayout layout, bool big, size_t ptr) {
  const bool go12 = layout == GoPclntabLayout::kGo12;
  const bool rel = layout >= GoPclntabLayout::kGo118;
  std::vector<FuncSpec> funcs = {
      {"main.alpha", 0x0, 0x40, {{10, 0x10}, {11, 0x20}, {77, 0x30}, {12, 0x40}}, go12 ? 1 : 0},
      {"pkg/b.beta", 0x40, 0xa0, {{20, 0x60}}, go12 ? 2 : 0},
  };
  Buf b{{}, big, ptr};
  uint32_t magic = layout == GoPclntabLayout::kGo12    ? 0xfffffffb
                   : layout == GoPclntabLayout::kGo116 ? 0xfffffffa
                   : layout == GoPclntabLayout::kGo118 ? 0xfffffff0
                                                       : 0xfffffff1;
  b.u32(magic);
  b.bytes.insert(b.bytes.end(), {0, 0, 1, static_cast<uint8_t>(ptr)});

  if (go12) {
    b.uptr(funcs.size());
    size_t functab = b.bytes.size();
    for (size_t i = 0; i < 2 * funcs.size() + 1; ++i) b.uptr(0);
    size_t filetab_field = b.bytes.size();
    b.u32(0);
    size_t file_a = b.str("/src/a.go");
    size_t file_b = b.str("/src/b.go");
    b.align(4);
    size_t filetab = b.bytes.size();
    b.u32(3);  // count including the unused slot 0
    b.u32(file_a);
    b.u32(file_b);
    b.patch(filetab_field, filetab, 4);
    for (size_t i = 0; i < funcs.size(); ++i) {
      const auto& f = funcs[i];
      size_t name = b.str(f.name);
      b.bytes.push_back(0);  // keep pc tables off offset 0 ("no table")
      size_t pcln = b.bytes.size();
      auto ln = pcvalue_table(f.lines);
      b.bytes.insert(b.bytes.end(), ln.begin(), ln.end());
      size_t pcfile = b.bytes.size();
      auto fl = pcvalue_table({{f.file, f.end - f.start}});
      b.bytes.insert(b.bytes.end(), fl.begin(), fl.end());
      b.align(ptr);
      size_t rec = b.bytes.size();
      b.uptr(kText + f.start);
      b.u32(name);
      b.u32(0);
      b.u32(0);
      b.u32(0);
      b.u32(pcfile);
      b.u32(pcln);
      b.u32(0);
      b.u32(0);  // funcID, pad, nfuncdata
      b.patch(functab + 2 * i * ptr, kText + f.start, ptr);
      b.patch(functab + (2 * i + 1) * ptr, rec, ptr);
    }
    b.patch(functab + 2 * funcs.size() * ptr, kText + funcs.back().end, ptr);
    return {b.bytes, {}};
  }

  size_t words = rel ? 8 : 7;
  size_t hdr = b.bytes.size();
  for (size_t i = 0; i < words; ++i) b.uptr(0);
  auto set_word = [&](size_t i, uint64_t v) { b.patch(hdr + i * ptr, v, ptr); };
  set_word(0, funcs.size());
  set_word(1, 2);
  size_t w = 2;
  if (rel) set_word(w++, kText);

  size_t funcname = b.bytes.size();
  std::vector<size_t> names;
  for (const auto& f : funcs) names.push_back(b.str(f.name) - funcname);
  size_t gamma_name = b.str("pkg/c.gamma") - funcname;
  b.align(4);
  size_t filetab_strings_at = 0;
  size_t cutab = b.bytes.size();
  b.u32(0);   // CU 0: file 0 is a.go (filetab offset 0)
  b.u32(10);  // CU 1: file 0 is b.go (filetab offset 10)
  size_t filetab = b.bytes.size();
  filetab_strings_at = b.str("/src/a.go");
  b.str("/src/b.go");
  (void)filetab_strings_at;
  size_t pctab = b.bytes.size();
  b.bytes.push_back(0);
  std::vector<size_t> pcln, pcfile;
  for (const auto& f : funcs) {
    pcln.push_back(b.bytes.size() - pctab);
    auto ln = pcvalue_table(f.lines);
    b.bytes.insert(b.bytes.end(), ln.begin(), ln.end());
    pcfile.push_back(b.bytes.size() - pctab);
    auto fl = pcvalue_table({{f.file, f.end - f.start}});
    b.bytes.insert(b.bytes.end(), fl.begin(), fl.end());
  }
  size_t inl_pcdata = b.bytes.size() - pctab;
  auto inl = pcvalue_table({{-1, 0x20}, {0, 0x30}, {-1, 0x40}});
  b.bytes.insert(b.bytes.end(), inl.begin(), inl.end());
  b.align(ptr);
  size_t funcdata = b.bytes.size();
  set_word(w++, funcname);
  set_word(w++, cutab);
  set_word(w++, filetab);
  set_word(w++, pctab);
  set_word(w++, funcdata);

  size_t field = rel ? 4 : ptr;
  size_t functab = b.bytes.size();
  for (size_t i = 0; i < 2 * funcs.size() + 1; ++i) b.put(0, field);

  // The inline tree: one call of gamma from alpha+0x18.
  Built out;
  Buf tree{{}, big, ptr};
  if (layout == GoPclntabLayout::kGo120) {
    tree.u32(0);  // funcID + pad
    tree.u32(gamma_name);
    tree.u32(0x18);
    tree.u32(70);
  } else {
    tree.u32(0xffff);  // parent -1, funcID 0
    tree.u32(0);
    tree.u32(76);
    tree.u32(gamma_name);
    tree.u32(0x18);
  }
  const uint64_t gofunc_vaddr = 0x4c0000;

  for (size_t i = 0; i < funcs.size(); ++i) {
    const auto& f = funcs[i];
    b.align(ptr);
    size_t rec = b.bytes.size() - funcdata;
    b.put(rel ? f.start : kText + f.start, rel ? 4 : ptr);
    b.u32(names[i]);
    b.u32(0);
    b.u32(0);
    b.u32(0);
    b.u32(pcfile[i]);
    b.u32(pcln[i]);
    bool has_tree = i == 0;
    b.u32(has_tree ? 3 : 0);                          // npcdata
    b.u32(i);                                         // cuOffset
    if (layout == GoPclntabLayout::kGo120) b.u32(1);  // startLine
    b.bytes.insert(b.bytes.end(), {0, 0, 0, static_cast<uint8_t>(has_tree ? 4 : 0)});
    if (has_tree) {
      b.u32(0);
      b.u32(0);
      b.u32(inl_pcdata);
      if (rel) {
        b.u32(UINT32_MAX);
        b.u32(UINT32_MAX);
        b.u32(UINT32_MAX);
        b.u32(0x10);  // gofunc + 0x10
      } else {
        b.align(ptr);
        b.uptr(0);
        b.uptr(0);
        b.uptr(0);
        b.uptr(gofunc_vaddr + 0x10);
      }
    }
    b.patch(functab + 2 * i * field, rel ? f.start : kText + f.start, field);
    b.patch(functab + (2 * i + 1) * field, rec, field);
  }
  b.patch(functab + 2 * funcs.size() * field, rel ? funcs.back().end : kText + funcs.back().end,
          field);
  out.table = b.bytes;
  out.gofunc.assign(0x10, 0);
  out.gofunc.insert(out.gofunc.end(), tree.bytes.begin(), tree.bytes.end());
  return out;
}

struct Case {
  GoPclntabLayout layout;
  bool big;
  size_t ptr;
};

class Layouts : public ::testing::TestWithParam<Case> {};

TEST_P(Layouts, NamesFilesLinesAndInlinedFrames) {
  Case c = GetParam();
  Built built = build(c.layout, c.big, c.ptr);
  GoPclntabOptions options;
  options.funcdata = {built.gofunc, 0x4c0000};
  options.gofunc = 0x4c0000;
  auto t = GoPclntab::parse(built.table, options);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->layout(), c.layout);
  EXPECT_EQ(t->function_count(), 2u);
  EXPECT_EQ(t->min_pc(), kText);
  EXPECT_EQ(t->max_pc(), kText + 0xa0);

  auto f = t->lookup(kText + 0x5);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->function, "main.alpha");
  EXPECT_EQ(f->file, "/src/a.go");
  EXPECT_EQ(f->line, 10);
  EXPECT_EQ(f->entry, kText);

  f = t->lookup(kText + 0x3f);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->line, 12);

  f = t->lookup(kText + 0x40);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->function, "pkg/b.beta");
  EXPECT_EQ(f->file, "/src/b.go");
  EXPECT_EQ(f->line, 20);
  EXPECT_EQ(f->entry, kText + 0x40);

  EXPECT_FALSE(t->lookup(kText - 1));
  EXPECT_FALSE(t->lookup(kText + 0xa0));

  std::array<GoFrame, 4> frames;
  size_t n = t->lookup_frames(kText + 0x24, frames);
  if (c.layout == GoPclntabLayout::kGo12) {
    ASSERT_EQ(n, 1u);  // the 1.2 layout's inline trees are not read
    EXPECT_EQ(frames[0].function, "main.alpha");
    return;
  }
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(frames[0].function, "pkg/c.gamma");
  EXPECT_TRUE(frames[0].inlined);
  EXPECT_EQ(frames[0].line, 77);
  EXPECT_EQ(frames[1].function, "main.alpha");
  EXPECT_FALSE(frames[1].inlined);
  EXPECT_EQ(frames[1].line, 11);  // line at the call site alpha+0x18

  // Outside the inlined range, one frame.
  n = t->lookup_frames(kText + 0x12, frames);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(frames[0].line, 11);

  // A one-slot buffer keeps the innermost frame.
  n = t->lookup_frames(kText + 0x24, std::span<GoFrame>(frames).first(1));
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(frames[0].function, "pkg/c.gamma");
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, Layouts,
                         ::testing::Values(Case{GoPclntabLayout::kGo12, false, 8},
                                           Case{GoPclntabLayout::kGo12, true, 4},
                                           Case{GoPclntabLayout::kGo116, false, 8},
                                           Case{GoPclntabLayout::kGo116, true, 4},
                                           Case{GoPclntabLayout::kGo118, false, 8},
                                           Case{GoPclntabLayout::kGo118, true, 8},
                                           Case{GoPclntabLayout::kGo120, false, 8},
                                           Case{GoPclntabLayout::kGo120, false, 4},
                                           Case{GoPclntabLayout::kGo120, true, 8}));

TEST(GoPclntab, RejectsWhatIsNotAPclntab) {
  std::vector<uint8_t> junk(64, 0xab);
  EXPECT_FALSE(GoPclntab::parse(junk).ok());
  EXPECT_FALSE(GoPclntab::parse({}).ok());
  Built built = build(GoPclntabLayout::kGo120, false, 8);
  built.table[7] = 3;  // pointer size
  EXPECT_FALSE(GoPclntab::parse(built.table).ok());
}

// Every prefix and many single-byte corruptions of a valid table: parse fails or lookups stay
// inside the bytes (ASan/UBSan builds turn any stray read into a failure).
TEST(GoPclntab, TruncatedAndCorruptTablesNeverReadOutOfBounds) {
  for (auto layout : {GoPclntabLayout::kGo12, GoPclntabLayout::kGo116, GoPclntabLayout::kGo118,
                      GoPclntabLayout::kGo120}) {
    Built built = build(layout, false, 8);
    for (size_t len = 0; len < built.table.size(); ++len) {
      std::vector<uint8_t> prefix(built.table.begin(), built.table.begin() + len);
      auto t = GoPclntab::parse(prefix);
      if (!t.ok()) continue;
      std::array<GoFrame, 4> frames;
      for (uint64_t pc = kText; pc < kText + 0xa0; pc += 7) {
        (void)t->lookup(pc);
        (void)t->lookup_frames(pc, frames);
      }
    }
    for (size_t at = 0; at < built.table.size(); ++at) {
      for (uint8_t value : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = built.table;
        bad[at] = value;
        GoPclntabOptions options;
        options.funcdata = {built.gofunc, 0x4c0000};
        options.gofunc = 0x4c0000;
        auto t = GoPclntab::parse(bad, options);
        if (!t.ok()) continue;
        std::array<GoFrame, 4> frames;
        for (uint64_t pc = kText; pc < kText + 0xa0; pc += 5) {
          (void)t->lookup(pc);
          (void)t->lookup_frames(pc, frames);
        }
      }
    }
  }
}

TEST(GoPclntab, FindsTheHeaderByMagic) {
  Built built = build(GoPclntabLayout::kGo118, false, 8);
  std::vector<uint8_t> file(1000, 0xff);
  file.insert(file.end(), built.table.begin(), built.table.end());
  auto at = find_pclntab_by_magic(file);
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, 1000u);
  EXPECT_FALSE(find_pclntab_by_magic(std::vector<uint8_t>(4096, 0xff)));
}

}  // namespace
}  // namespace sonde::symbolize
