// The ELF reader and the return-site decoder on malformed and synthetic inputs. Run under
// ASan/UBSan (SONDE_SANITIZE=ON): a crash or an out-of-bounds read fails the test binary.
#include "agent/symbols/elf_file.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "agent/symbols/return_sites.h"
#include "agent/symbols/symbol_resolver.h"

namespace sonde::symbols {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  auto mapping = MappedFile::open(path);
  EXPECT_TRUE(mapping.ok()) << path;
  if (!mapping.ok()) return {};
  auto b = mapping->bytes();
  return std::vector<uint8_t>(b.begin(), b.end());
}

// Some ELF with .symtab, .dynsym or both: the Go fixture when built, else node.
std::string sample_path() {
  const std::string fixture = SONDE_GO_TLS_FIXTURE;
  return fixture.empty() ? "/usr/bin/node" : fixture;
}

template <typename T>
T get(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
template <typename T>
void put(std::vector<uint8_t>& b, size_t off, const T& v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}

// Parses and, when that works, runs everything a caller would: symbols, build-id, resolve.
// Returns whether the whole chain succeeded.
bool exercise(std::span<const uint8_t> bytes, std::string* error = nullptr) {
  auto elf = ElfFile::parse(bytes);
  if (!elf.ok()) {
    if (error) *error = elf.error().message();
    return false;
  }
  (void)elf->build_id();
  const std::vector<std::string> names = {"main.main", "crypto/tls.(*Conn).Write", "uv__io_poll",
                                          "_start"};
  auto targets = resolve(*elf, names);
  if (!targets.ok()) {
    if (error) *error = targets.error().message();
    return false;
  }
  return true;
}

TEST(ElfFile, RejectsNonElfInputs) {
  std::string error;
  EXPECT_FALSE(exercise({}, &error));
  EXPECT_NE(error.find("not an ELF"), std::string::npos) << error;
  const std::string text = "#!/bin/sh\necho hello\n";
  EXPECT_FALSE(exercise({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, &error));
  EXPECT_NE(error.find("not an ELF"), std::string::npos) << error;
  const uint8_t partial_magic[] = {0x7f, 'E', 'L'};
  EXPECT_FALSE(exercise(partial_magic, &error));
}

TEST(ElfFile, RejectsElf32AndBigEndianWithAClearMessage) {
  auto bytes = read_file(sample_path());
  ASSERT_FALSE(bytes.empty());
  auto elf32 = bytes;
  elf32[EI_CLASS] = ELFCLASS32;
  std::string error;
  EXPECT_FALSE(exercise(elf32, &error));
  EXPECT_NE(error.find("32-bit"), std::string::npos) << error;
  auto big = bytes;
  big[EI_DATA] = ELFDATA2MSB;
  EXPECT_FALSE(exercise(big, &error));
  EXPECT_NE(error.find("big-endian"), std::string::npos) << error;
}

// Cutting the file anywhere before the end of the last section or segment with contents must
// be an error at parse time; the full file must parse.
void expect_truncations_fail(const std::string& path) {
  SCOPED_TRACE(path);
  auto bytes = read_file(path);
  ASSERT_FALSE(bytes.empty());
  auto elf = ElfFile::parse(bytes);
  ASSERT_TRUE(elf.ok()) << elf.error().message();
  std::set<uint64_t> cuts = {0, 1, 4, EI_NIDENT, sizeof(Elf64_Ehdr) - 1, sizeof(Elf64_Ehdr)};
  for (size_t i = 1; i < elf->section_count(); ++i) {
    const ElfSection s = elf->section(i);
    if (s.type == SHT_NOBITS) continue;
    cuts.insert(s.offset);
    cuts.insert(s.offset + s.size);
    if (s.size > 0) cuts.insert(s.offset + s.size - 1);
  }
  for (size_t i = 0; i < elf->segment_count(); ++i) {
    const ElfSegment seg = elf->segment(i);
    cuts.insert(seg.offset);
    cuts.insert(seg.offset + seg.filesz);
  }
  const Elf64_Ehdr ehdr = get<Elf64_Ehdr>(bytes, 0);
  const uint64_t shdr_end = ehdr.e_shoff + uint64_t{ehdr.e_shnum} * sizeof(Elf64_Shdr);
  cuts.insert(ehdr.e_shoff);
  cuts.insert(shdr_end - 1);
  size_t tried = 0;
  for (uint64_t cut : cuts) {
    if (cut >= bytes.size()) continue;
    std::string error;
    // Every section and the section header table end at or before the file's end, and the
    // table is the last thing in these files: any shorter prefix loses part of something.
    EXPECT_FALSE(exercise(std::span<const uint8_t>(bytes).first(cut), &error)) << "cut " << cut;
    ++tried;
  }
  EXPECT_GT(tried, 20u);
  EXPECT_TRUE(exercise(bytes));
}

TEST(ElfFile, TruncatedAtEverySectionBoundaryIsAnError) {
  expect_truncations_fail(sample_path());
  if (::access("/usr/bin/node", R_OK) == 0) expect_truncations_fail("/usr/bin/node");
}

class Mutated : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = read_file(sample_path());
    ASSERT_FALSE(bytes_.empty());
    ehdr_ = get<Elf64_Ehdr>(bytes_, 0);
  }
  size_t shdr_at(size_t i) const { return ehdr_.e_shoff + i * sizeof(Elf64_Shdr); }
  // Index of the first section of type, 0 when absent.
  size_t find_type(uint32_t type) const {
    for (size_t i = 1; i < ehdr_.e_shnum; ++i) {
      if (get<Elf64_Shdr>(bytes_, shdr_at(i)).sh_type == type) return i;
    }
    return 0;
  }
  std::vector<uint8_t> bytes_;
  Elf64_Ehdr ehdr_{};
};

TEST_F(Mutated, AbsurdSectionCount) {
  auto b = bytes_;
  auto h = ehdr_;
  h.e_shnum = 0xfff0;
  put(b, 0, h);
  std::string error;
  EXPECT_FALSE(exercise(b, &error));
  EXPECT_NE(error.find("past the end"), std::string::npos) << error;
}

TEST_F(Mutated, ExtendedSectionCountFromSectionZero) {
  auto b = bytes_;
  auto h = ehdr_;
  h.e_shnum = 0;
  put(b, 0, h);
  auto s0 = get<Elf64_Shdr>(b, shdr_at(0));
  s0.sh_size = uint64_t{1} << 60;
  put(b, shdr_at(0), s0);
  EXPECT_FALSE(exercise(b));
  s0.sh_size = ehdr_.e_shnum;  // the legitimate extended form must parse
  put(b, shdr_at(0), s0);
  EXPECT_TRUE(exercise(b));
}

TEST_F(Mutated, AbsurdProgramHeaderCountAndOffsets) {
  auto b = bytes_;
  auto h = ehdr_;
  h.e_phnum = 0xfffe;
  put(b, 0, h);
  EXPECT_FALSE(exercise(b));
  h = ehdr_;
  h.e_phoff = ~uint64_t{0} - 8;
  put(b, 0, h);
  EXPECT_FALSE(exercise(b));
  h = ehdr_;
  h.e_shoff = ~uint64_t{0} - 8;
  put(b, 0, h);
  EXPECT_FALSE(exercise(b));
  h = ehdr_;
  h.e_shentsize = 12;
  put(b, 0, h);
  EXPECT_FALSE(exercise(b));
  h = ehdr_;
  h.e_shstrndx = 0xfff0;
  put(b, 0, h);
  EXPECT_FALSE(exercise(b));
}

TEST_F(Mutated, SymbolTableWithBadSizesAndLinks) {
  const size_t symtab = find_type(SHT_SYMTAB);
  ASSERT_NE(symtab, 0u);
  const auto orig = get<Elf64_Shdr>(bytes_, shdr_at(symtab));
  struct Case {
    const char* what;
    void (*mutate)(Elf64_Shdr&);
  };
  const Case cases[] = {
      {"huge size", [](Elf64_Shdr& s) { s.sh_size = uint64_t{1} << 62; }},
      {"offset past end", [](Elf64_Shdr& s) { s.sh_offset = uint64_t{1} << 40; }},
      {"wrapping offset", [](Elf64_Shdr& s) { s.sh_offset = ~uint64_t{0} - 4; }},
      {"entsize 0", [](Elf64_Shdr& s) { s.sh_entsize = 0; }},
      {"link out of range", [](Elf64_Shdr& s) { s.sh_link = 0xffff; }},
      {"link to itself", [](Elf64_Shdr& s) { s.sh_link = 0; }},
  };
  for (const auto& c : cases) {
    auto b = bytes_;
    auto s = orig;
    c.mutate(s);
    put(b, shdr_at(symtab), s);
    std::string error;
    EXPECT_FALSE(exercise(b, &error)) << c.what;
    EXPECT_FALSE(error.empty()) << c.what;
  }
}

TEST_F(Mutated, SymbolNamesAndValuesOutOfRangeAreSkippedNotFatal) {
  const size_t symtab = find_type(SHT_SYMTAB);
  ASSERT_NE(symtab, 0u);
  const auto sh = get<Elf64_Shdr>(bytes_, shdr_at(symtab));
  auto b = bytes_;
  // Point every other symbol's name past the string table and its value far away.
  for (uint64_t off = sh.sh_offset + sizeof(Elf64_Sym);
       off + sizeof(Elf64_Sym) <= sh.sh_offset + sh.sh_size; off += 2 * sizeof(Elf64_Sym)) {
    auto sym = get<Elf64_Sym>(b, off);
    sym.st_name = 0xfffffff0;
    sym.st_value = ~uint64_t{0} - 2;
    sym.st_size = ~uint64_t{0};
    put(b, off, sym);
  }
  EXPECT_TRUE(exercise(b));
}

TEST_F(Mutated, UnterminatedStringTable) {
  const size_t symtab = find_type(SHT_SYMTAB);
  ASSERT_NE(symtab, 0u);
  const auto strtab =
      get<Elf64_Shdr>(bytes_, shdr_at(get<Elf64_Shdr>(bytes_, shdr_at(symtab)).sh_link));
  auto b = bytes_;
  std::memset(b.data() + strtab.sh_offset, 'A', strtab.sh_size);
  EXPECT_TRUE(exercise(b));
}

TEST_F(Mutated, HostileNotes) {
  auto b = bytes_;
  for (size_t i = 0; i < ehdr_.e_phnum; ++i) {
    const size_t at = ehdr_.e_phoff + i * sizeof(Elf64_Phdr);
    const auto ph = get<Elf64_Phdr>(b, at);
    if (ph.p_type != PT_NOTE || ph.p_filesz < sizeof(Elf64_Nhdr)) continue;
    Elf64_Nhdr n{0xfffffff0, 0xfffffff0, NT_GNU_BUILD_ID};
    put(b, ph.p_offset, n);
  }
  auto elf = ElfFile::parse(b);
  ASSERT_TRUE(elf.ok());
  (void)elf->build_id();
}

// ---- return sites on synthetic code ------------------------------------------------------------

TEST(ReturnSites, X86DecodesInsteadOfScanningForC3) {
  // mov eax, 0xc3c3c3c3 ; ret : only offset 5 is a RET, four 0xC3 bytes are an immediate.
  const uint8_t code[] = {0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3};
  auto sites = find_return_sites(Machine::kX86_64, code, 0x1000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kFound);
  EXPECT_EQ(sites.returns, (std::vector<uint32_t>{5}));
}

TEST(ReturnSites, X86TailCallOnly) {
  // test edi, edi ; je +2 (inside) ; jmp rel32 far away ; jmp *rax
  const uint8_t code[] = {0x85, 0xff, 0x74, 0x05, 0xe9, 0x00, 0x10, 0x00, 0x00, 0xff, 0xe0};
  auto sites = find_return_sites(Machine::kX86_64, code, 0x2000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kTailCallOnly);
  EXPECT_TRUE(sites.returns.empty());
  EXPECT_EQ(sites.exit_jumps, (std::vector<uint32_t>{4, 9}));
}

TEST(ReturnSites, X86GarbageIsADecodeError) {
  const uint8_t code[] = {0x90, 0x06};  // nop ; push es (invalid in 64-bit mode)
  auto sites = find_return_sites(Machine::kX86_64, code, 0x3000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kDecodeError);
  const uint8_t cut[] = {0x48, 0xb8, 0x01};  // movabs cut short by the function's end
  EXPECT_EQ(find_return_sites(Machine::kX86_64, cut, 0x3000).status,
            ReturnSiteStatus::kDecodeError);
}

TEST(ReturnSites, Aarch64FixedWidth) {
  const uint32_t words[] = {
      0xa9bf7bfd,  // stp x29, x30, [sp, #-16]!
      0x54000040,  // b.eq +8 (inside)
      0xd65f03c0,  // ret
      0x14000100,  // b +0x400 (outside: tail call)
      0xd61f0200,  // br x16
      0xd65f0bff,  // retaa
  };
  std::vector<uint8_t> code(sizeof(words));
  std::memcpy(code.data(), words, sizeof(words));
  auto sites = find_return_sites(Machine::kAarch64, code, 0x4000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kFound);
  EXPECT_EQ(sites.returns, (std::vector<uint32_t>{8, 20}));
  EXPECT_EQ(sites.exit_jumps, (std::vector<uint32_t>{12, 16}));

  const uint32_t tail[] = {0xd503201f, 0x17ffff00};  // nop ; b -0x400
  std::memcpy(code.data(), tail, sizeof(tail));
  sites = find_return_sites(Machine::kAarch64, std::span(code).first(8), 0x4000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kTailCallOnly);
  EXPECT_EQ(sites.exit_jumps, (std::vector<uint32_t>{4}));

  EXPECT_EQ(find_return_sites(Machine::kAarch64, std::span(code).first(6), 0x4000).status,
            ReturnSiteStatus::kDecodeError);
}

TEST(ReturnSites, UnsupportedMachine) {
  const uint8_t code[] = {0xc3};
  EXPECT_EQ(find_return_sites(Machine::kOther, code, 0).status,
            ReturnSiteStatus::kUnsupportedMachine);
}

}  // namespace
}  // namespace sonde::symbols
