// GoPclntab on a real Go binary built by the test build (and a stripped copy), compared with Go's
// own `go tool addr2line` and, for inlined frames, with the DWARF inline records as
// llvm-symbolizer reads them. Sections are located with binutils' readelf.
#include "agent/symbolize/go_pclntab.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "agent/symbolize/go_binary.h"
#include "agent/symbolize/tests/allocation_counter.h"
#include "agent/symbolize/tests/go_test_binary.h"

namespace sonde::symbolize {
namespace {

using testing::readelf_section;
using testing::run_command;

struct Loaded {
  std::vector<uint8_t> file;
  testing::Section pclntab;
  testing::Section text;
  testing::Section noptrdata;
  testing::Section rodata;
};

Loaded load(const std::string& binary) {
  Loaded l;
  l.file = testing::read_file(binary);
  auto p = readelf_section(binary, ".gopclntab");
  auto t = readelf_section(binary, ".text");
  auto n = readelf_section(binary, ".noptrdata");
  auto r = readelf_section(binary, ".rodata");
  EXPECT_TRUE(p && t && n && r) << binary;
  if (p) l.pclntab = *p;
  if (t) l.text = *t;
  if (n) l.noptrdata = *n;
  if (r) l.rodata = *r;
  return l;
}

std::span<const uint8_t> bytes_of(const Loaded& l, const testing::Section& s) {
  return std::span<const uint8_t>(l.file).subspan(s.offset, s.size);
}

// Go 1.18+ writes "[...]" for type arguments and array lengths in pclntab names where DWARF
// spells them out ("main.collect[go.shape.int_0]"); both are collapsed for comparison.
std::string collapse_brackets(std::string_view name) {
  std::string out;
  int depth = 0;
  for (char c : name) {
    if (c == '[') {
      if (depth++ == 0) out += "[...]";
    } else if (c == ']') {
      if (depth > 0) --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  return out;
}

class GoTestBinaries : public ::testing::TestWithParam<const char*> {};

// Function and file:line of 20,000 random addresses plus every function entry, against
// `go tool addr2line` (debug/gosym underneath: physical function, innermost position).
void expect_agreement_with_go_addr2line(const std::string& binary) {
  Loaded l = load(binary);
  GoPclntabOptions options;
  options.text_start = l.text.addr;
  auto table = GoPclntab::parse(bytes_of(l, l.pclntab), options);
  ASSERT_TRUE(table.ok()) << table.error().message();
  EXPECT_EQ(table->layout(), GoPclntabLayout::kGo118);
  ASSERT_GT(table->function_count(), 1000u);

  std::vector<uint64_t> pcs;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    pcs.push_back(table->min_pc() + rng() % (table->max_pc() - table->min_pc()));
  }
  for (uint32_t i = 0; i < table->function_count(); ++i)
    pcs.push_back(table->function_at(i)->entry);

  std::string in_path = ::testing::TempDir() + "/sonde-addrs-" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream in(in_path);
    for (uint64_t pc : pcs) in << "0x" << std::hex << pc << "\n";
  }
  std::istringstream out(
      run_command(std::string(SONDE_GO_TOOLDIR) + "/addr2line '" + binary + "' < " + in_path));
  (void)std::remove(in_path.c_str());

  size_t agree = 0, disagree = 0;
  std::string want_func, want_pos;
  for (uint64_t pc : pcs) {
    ASSERT_TRUE(std::getline(out, want_func) && std::getline(out, want_pos)) << "short output";
    auto got = table->lookup(pc);
    std::string got_func = got ? std::string(got->function) : "?";
    // addr2line prints ":-1" where the pc tables have no position (padding after a
    // function's code), "?:0" where no function contains the pc.
    std::string got_pos =
        !got ? "?:0"
             : std::string(got->file) + ":" + std::to_string(got->line == 0 ? -1 : got->line);
    if (got_func == want_func && got_pos == want_pos) {
      ++agree;
    } else if (++disagree <= 10) {
      std::cout << "disagreement: " << std::hex << "0x" << pc << ": got " << got_func << " "
                << got_pos << ", go tool addr2line says " << want_func << " " << want_pos << "\n";
    }
  }
  double rate = static_cast<double>(agree) / static_cast<double>(pcs.size());
  ::testing::Test::RecordProperty("agreement", std::to_string(rate));
  EXPECT_GE(rate, 0.999) << agree << " of " << pcs.size();
}

TEST_P(GoTestBinaries, AgreesWithGoToolAddr2line) {
  expect_agreement_with_go_addr2line(GetParam());
}

// A large real-world Go binary built by someone else: Debian's stripped Go compiler.
TEST(GoToolchainBinary, CompilerAgreesWithGoToolAddr2line) {
  std::string compile = std::string(SONDE_GO_TOOLDIR) + "/compile";
  if (access(compile.c_str(), R_OK) != 0) GTEST_SKIP() << compile << " not installed";
  expect_agreement_with_go_addr2line(compile);
}

TEST_P(GoTestBinaries, FindsTableByMagicAndModuleData) {
  const std::string binary = GetParam();
  Loaded l = load(binary);
  auto at = find_pclntab_by_magic(l.file);
  ASSERT_TRUE(at);
  EXPECT_EQ(*at, l.pclntab.offset);

  auto md = find_go_moduledata(bytes_of(l, l.pclntab), l.pclntab.addr,
                               {bytes_of(l, l.noptrdata), l.noptrdata.addr});
  ASSERT_TRUE(md);
  EXPECT_EQ(md->text, l.text.addr);
  // Ground truth from the unstripped binary's symbols, as Go's nm prints them.
  EXPECT_EQ(md->vaddr, testing::go_nm_address(SONDE_GO_TOOLDIR, SONDE_GO_TEST_BINARY,
                                              "runtime.firstmoduledata"));
  EXPECT_EQ(md->gofunc,
            testing::go_nm_address(SONDE_GO_TOOLDIR, SONDE_GO_TEST_BINARY, "go.func.*"));
}

INSTANTIATE_TEST_SUITE_P(Binaries, GoTestBinaries,
                         ::testing::Values(SONDE_GO_TEST_BINARY, SONDE_GO_TEST_BINARY_STRIPPED));

// Inline expansion against DWARF: for each sampled pc, the chain of function names and lines
// from llvm-symbolizer --inlines. The pclntab and DWARF are written by the same compiler
// from the same positions, so they should tell the same story. One known difference: an
// autogenerated pointer-receiver wrapper that inlines its value method has that inlined call in
// the pclntab tree (reported here, as "<autogenerated>:1" for the wrapper) but not in DWARF.
TEST(GoPclntabInline, InlinedFramesAgreeWithDwarf) {
  Loaded l = load(SONDE_GO_TEST_BINARY);
  GoPclntabOptions options;
  options.text_start = l.text.addr;
  options.funcdata = {bytes_of(l, l.rodata), l.rodata.addr};
  auto md = find_go_moduledata(bytes_of(l, l.pclntab), l.pclntab.addr,
                               {bytes_of(l, l.noptrdata), l.noptrdata.addr});
  ASSERT_TRUE(md);
  options.gofunc = md->gofunc;
  auto table = GoPclntab::parse(bytes_of(l, l.pclntab), options);
  ASSERT_TRUE(table.ok());

  std::vector<uint64_t> pcs;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 5000; ++i) {
    pcs.push_back(table->min_pc() + rng() % (table->max_pc() - table->min_pc()));
  }
  std::string in_path =
      ::testing::TempDir() + "/sonde-inline-addrs-" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream in(in_path);
    for (uint64_t pc : pcs) in << "0x" << std::hex << pc << "\n";
  }
  std::istringstream out(run_command("llvm-symbolizer --inlines --obj='" +
                                     std::string(SONDE_GO_TEST_BINARY) + "' < " + in_path));
  (void)std::remove(in_path.c_str());

  size_t agree = 0, with_inlines = 0, compared = 0;
  std::string line;
  for (uint64_t pc : pcs) {
    std::vector<std::pair<std::string, int>> want;
    while (std::getline(out, line) && !line.empty()) {
      std::string pos;
      if (!std::getline(out, pos)) break;
      size_t c2 = pos.rfind(':');
      size_t c1 = pos.rfind(':', c2 - 1);
      // DWARF names assembly functions with their ABI ("runtime.memmove.abi0"); the pclntab
      // does not.
      if (line.ends_with(".abi0")) line.resize(line.size() - 5);
      want.emplace_back(collapse_brackets(line),
                        std::atoi(pos.substr(c1 + 1, c2 - c1 - 1).c_str()));
    }
    // DWARF has nothing for some runtime assembly: not a comparison.
    if (want.empty() || want[0].first == "??") continue;
    std::array<GoFrame, 16> frames;
    size_t n = table->lookup_frames(pc, frames);
    ++compared;
    if (want.size() > 1) ++with_inlines;
    bool same = n == want.size();
    for (size_t i = 0; same && i < n; ++i) {
      same = collapse_brackets(frames[i].function) == want[i].first &&
             frames[i].line == want[i].second;
    }
    if (same) {
      ++agree;
    } else if (compared - agree <= 12) {
      std::ostringstream msg;
      msg << std::hex << "0x" << pc << std::dec << ": got";
      for (size_t i = 0; i < n; ++i) msg << " " << frames[i].function << ":" << frames[i].line;
      msg << "; DWARF";
      for (auto& [f, ln] : want) msg << " " << f << ":" << ln;
      std::cout << "disagreement: " << msg.str() << "\n";
    }
  }
  EXPECT_GT(with_inlines, 100u);
  double rate = static_cast<double>(agree) / static_cast<double>(compared);
  RecordProperty("inline_agreement", std::to_string(rate));
  EXPECT_GE(rate, 0.995) << agree << " of " << compared;
}

// GoBinary finds the table three ways; each must give the same answers as the section itself.
// The other two are forced by editing a copy of the binary: renaming the section (leaving the
// runtime.pclntab symbol) and removing the section headers (leaving only the magic).
TEST(GoBinaryLocate, SectionSymbolAndMagicScanAgree) {
  std::vector<uint8_t> original = testing::read_file(SONDE_GO_TEST_BINARY);
  auto by_section = GoBinary::open(SONDE_GO_TEST_BINARY);
  ASSERT_TRUE(by_section.ok()) << by_section.error().message();
  EXPECT_EQ((*by_section)->found_by(), GoBinary::Found::kSection);
  EXPECT_TRUE((*by_section)->has_inline_trees());

  std::vector<uint8_t> renamed = original;
  auto shstrtab = readelf_section(SONDE_GO_TEST_BINARY, ".shstrtab");
  ASSERT_TRUE(shstrtab);
  std::string names(renamed.begin() + shstrtab->offset,
                    renamed.begin() + shstrtab->offset + shstrtab->size);
  size_t at = names.find(".gopclntab");
  ASSERT_NE(at, std::string::npos);
  renamed[shstrtab->offset + at + 9] = 'X';
  auto by_symbol = GoBinary::from_bytes(renamed);
  ASSERT_TRUE(by_symbol.ok()) << by_symbol.error().message();
  EXPECT_EQ((*by_symbol)->found_by(), GoBinary::Found::kSymbol);

  std::vector<uint8_t> headerless = testing::read_file(SONDE_GO_TEST_BINARY_STRIPPED);
  std::fill(headerless.begin() + 0x28, headerless.begin() + 0x30, 0);  // e_shoff
  std::fill(headerless.begin() + 0x3c, headerless.begin() + 0x40, 0);  // e_shnum, e_shstrndx
  auto by_magic = GoBinary::from_bytes(headerless);
  ASSERT_TRUE(by_magic.ok()) << by_magic.error().message();
  EXPECT_EQ((*by_magic)->found_by(), GoBinary::Found::kMagicScan);
  EXPECT_TRUE((*by_magic)->has_inline_trees()) << "module data not found by scanning";

  const GoPclntab& want = (*by_section)->pclntab();
  std::mt19937_64 rng(5);
  for (int i = 0; i < 5000; ++i) {
    uint64_t pc = want.min_pc() + rng() % (want.max_pc() - want.min_pc());
    std::array<GoFrame, 8> a, b, c;
    size_t na = want.lookup_frames(pc, a);
    size_t nb = (*by_symbol)->pclntab().lookup_frames(pc, b);
    size_t nc = (*by_magic)->pclntab().lookup_frames(pc, c);
    ASSERT_EQ(na, nb) << std::hex << pc;
    ASSERT_EQ(na, nc) << std::hex << pc;
    for (size_t k = 0; k < na; ++k) {
      ASSERT_EQ(a[k].function, b[k].function);
      ASSERT_EQ(a[k].function, c[k].function);
      ASSERT_EQ(a[k].line, c[k].line);
      ASSERT_EQ(a[k].file, c[k].file);
    }
  }
}

// The checkpoint index only shortens walks: with and without it every answer is the same.
TEST(GoPclntabIndex, SameAnswersWithAndWithoutIndex) {
  Loaded l = load(SONDE_GO_TEST_BINARY);
  GoPclntabOptions options;
  options.text_start = l.text.addr;
  options.funcdata = {bytes_of(l, l.rodata), l.rodata.addr};
  options.gofunc = testing::go_nm_address(SONDE_GO_TOOLDIR, SONDE_GO_TEST_BINARY, "go.func.*");
  auto indexed = GoPclntab::parse(bytes_of(l, l.pclntab), options);
  options.build_index = false;
  auto plain = GoPclntab::parse(bytes_of(l, l.pclntab), options);
  ASSERT_TRUE(indexed.ok() && plain.ok());
  EXPECT_GT(indexed->index_bytes(), 0u);
  EXPECT_EQ(plain->index_bytes(), 0u);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 20000; ++i) {
    uint64_t pc = plain->min_pc() + rng() % (plain->max_pc() - plain->min_pc());
    std::array<GoFrame, 8> a, b;
    size_t na = indexed->lookup_frames(pc, a);
    size_t nb = plain->lookup_frames(pc, b);
    ASSERT_EQ(na, nb) << std::hex << pc;
    for (size_t k = 0; k < na; ++k) {
      ASSERT_EQ(a[k].function, b[k].function) << std::hex << pc;
      ASSERT_EQ(a[k].file, b[k].file) << std::hex << pc;
      ASSERT_EQ(a[k].line, b[k].line) << std::hex << pc;
    }
  }
}

// An inactive (SHT_NULL) header named .gopclntab whose range points far past the file: the ELF
// reader does not check inactive headers, so the table must not come from it (the fuzzer found
// the out-of-bounds read this was). The real table is still found through its symbol.
TEST(GoBinaryLocate, InactiveSectionHeaderIsNotTheTable) {
  std::vector<uint8_t> bytes = testing::read_file(SONDE_GO_TEST_BINARY);
  auto pclntab = readelf_section(SONDE_GO_TEST_BINARY, ".gopclntab");
  ASSERT_TRUE(pclntab);
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
  };
  const uint64_t shoff = u64(0x28);
  const uint16_t shnum = static_cast<uint16_t>(bytes[0x3c] | bytes[0x3d] << 8);
  size_t header = 0;
  for (size_t i = 1; i < shnum && header == 0; ++i) {
    const size_t at = shoff + i * 64;
    if (u64(at + 24) == pclntab->offset && u64(at + 32) == pclntab->size) header = at;
  }
  ASSERT_NE(header, 0u);
  std::fill(bytes.begin() + header + 4, bytes.begin() + header + 8, 0);  // sh_type = SHT_NULL
  const uint64_t far = uint64_t{1} << 49;
  std::memcpy(bytes.data() + header + 24, &far, sizeof far);  // sh_offset
  auto located = GoBinary::from_bytes(bytes);
  ASSERT_TRUE(located.ok()) << located.error().message();
  EXPECT_EQ((*located)->found_by(), GoBinary::Found::kSymbol);
}

TEST(GoBinaryLocate, NonGoBinaryIsAnError) {
  auto r = GoBinary::open("/bin/true");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no Go pclntab"), std::string::npos) << r.error().message();
  // Not even scanned for: a binary with section headers names its table if it has one.
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(GoBinary::open("/usr/bin/node").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(GoPclntabInline, LookupsAllocateNothing) {
  Loaded l = load(SONDE_GO_TEST_BINARY_STRIPPED);
  GoPclntabOptions options;
  options.funcdata = {bytes_of(l, l.rodata), l.rodata.addr};
  auto md = find_go_moduledata(bytes_of(l, l.pclntab), l.pclntab.addr,
                               {bytes_of(l, l.noptrdata), l.noptrdata.addr});
  ASSERT_TRUE(md);
  options.gofunc = md->gofunc;
  auto table = GoPclntab::parse(bytes_of(l, l.pclntab), options);
  ASSERT_TRUE(table.ok());
  std::vector<uint64_t> pcs;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    pcs.push_back(table->min_pc() + rng() % (table->max_pc() - table->min_pc()));
  }
  std::array<GoFrame, 8> frames;
  size_t found = 0;
  uint64_t before = testing::allocations();
  for (uint64_t pc : pcs) {
    if (table->lookup(pc)) ++found;
    found += table->lookup_frames(pc, frames) > 1 ? 1 : 0;
  }
  EXPECT_EQ(testing::allocations() - before, 0u);
  EXPECT_GT(found, 10000u);
}

}  // namespace
}  // namespace sonde::symbolize
