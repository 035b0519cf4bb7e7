// Bounded work per binary: a tenant's binary cannot make the agent decode a gigabyte, keep an
// unbounded list of return sites or walk an unbounded symbol table. Each over-cap binary gets a
// verdict a caller can recognize (is_too_large()), and the probe-target cache remembers it.
#include "agent/symbols/limits.h"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "agent/symbols/probe_target_cache.h"
#include "agent/symbols/return_sites.h"
#include "agent/symbols/symbol_resolver.h"
#include "agent/symbols/tests/heap_peak.h"
#include "agent/symbols/tests/synthetic_elf.h"
#include "agent/symbols/tests/temp_dir.h"
#include "common/unique_fd.h"

namespace sonde::symbols {
namespace {

using testing::SyntheticElf;

constexpr uint8_t kRet = 0xc3;
const std::vector<std::string> kTls = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};

std::vector<uint8_t> rets(size_t n) {
  return std::vector<uint8_t>(n, kRet);
}

// A Go-looking binary: (*Conn).Write is 16 RET instructions; (*Conn).Read starts one page
// later and spans `read_size` bytes of RETs — written at its start and end, a hole between.
SyntheticElf tls_binary(uint64_t read_size) {
  SyntheticElf elf;
  elf.text_size = 0x1000 + read_size;
  elf.functions = {{kTls[0], 0, 16}, {kTls[1], 0x1000, read_size}};
  elf.text = {{0, rets(16)}};
  const uint64_t real = std::min<uint64_t>(read_size, 64 * 1024);
  elf.text.push_back({0x1000, rets(real)});
  if (read_size > real) elf.text.push_back({0x1000 + read_size - real, rets(real)});
  return elf;
}

TEST(LimitsTest, GigabyteFunctionIsTooLargeToDecodeAndCostsNoMemory) {
  testing::TempDir dir;
  const std::string path = dir.path() / "gigabyte-read";
  const uint64_t gigabyte = uint64_t{1} << 30;
  tls_binary(gigabyte).write(path);

  testing::reset_heap_peak();
  auto targets = resolve_file(path, kTls);
  const uint64_t peak = testing::heap_peak_since_reset();
  ASSERT_TRUE(targets.ok()) << targets.error().message();

  const ProbeTarget& write = (*targets)[0];
  ASSERT_TRUE(write.found);
  EXPECT_EQ(write.return_status, ReturnSiteStatus::kFound);
  EXPECT_EQ(write.return_offsets.size(), 16u);

  // Read keeps what an entry probe needs, and no return site: decoding 1 GiB of RETs would
  // have produced a 4 GiB vector of offsets.
  const ProbeTarget& read = (*targets)[1];
  ASSERT_TRUE(read.found);
  EXPECT_EQ(read.size, gigabyte);
  EXPECT_EQ(read.address, SyntheticElf::kTextAddr + 0x1000);
  EXPECT_EQ(read.file_offset, SyntheticElf::kTextOffset + 0x1000);
  EXPECT_EQ(read.return_status, ReturnSiteStatus::kTooLarge);
  EXPECT_STREQ(return_site_status_name(read.return_status), "too-large");
  EXPECT_TRUE(read.return_offsets.empty());
  EXPECT_TRUE(read.exit_jump_offsets.empty());
  EXPECT_LT(peak, uint64_t{64} * 1024) << "heap bytes live at the peak of the resolve";
}

TEST(LimitsTest, FunctionWithMoreReturnsThanTheCapKeepsNone) {
  testing::TempDir dir;
  const std::string path = dir.path() / "many-returns";
  // 64 KiB of RETs: under the decode cap, 256 times over the return-site cap.
  tls_binary(64 * 1024).write(path);

  testing::reset_heap_peak();
  auto targets = resolve_file(path, kTls);
  const uint64_t peak = testing::heap_peak_since_reset();
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  const ProbeTarget& read = (*targets)[1];
  ASSERT_TRUE(read.found);
  EXPECT_EQ(read.return_status, ReturnSiteStatus::kTooLarge);
  EXPECT_TRUE(read.return_offsets.empty());
  EXPECT_LT(peak, uint64_t{64} * 1024);
}

TEST(LimitsTest, ReturnSiteCapIsExact) {
  const std::vector<uint8_t> at_cap = rets(kMaxReturnSites);
  ReturnSites sites = find_return_sites(Machine::kX86_64, at_cap, 0x1000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kFound);
  EXPECT_EQ(sites.returns.size(), kMaxReturnSites);

  const std::vector<uint8_t> over = rets(kMaxReturnSites + 1);
  sites = find_return_sites(Machine::kX86_64, over, 0x1000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kTooLarge);
  EXPECT_TRUE(sites.returns.empty());

  // aarch64: RET (0xd65f03c0) repeated, little-endian.
  std::vector<uint8_t> arm;
  for (size_t i = 0; i <= kMaxReturnSites; ++i) arm.insert(arm.end(), {0xc0, 0x03, 0x5f, 0xd6});
  sites = find_return_sites(Machine::kAarch64, arm, 0x1000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kTooLarge);
  arm.resize(arm.size() - 4);
  sites = find_return_sites(Machine::kAarch64, arm, 0x1000);
  EXPECT_EQ(sites.status, ReturnSiteStatus::kFound);
  EXPECT_EQ(sites.returns.size(), kMaxReturnSites);
}

TEST(LimitsTest, DecodeCapIsExact) {
  // NOPs then one RET: at the cap it decodes (and finds the RET), one byte more it does not.
  std::vector<uint8_t> code(kMaxDecodedFunctionBytes, 0x90);
  code.back() = kRet;
  EXPECT_EQ(find_return_sites(Machine::kX86_64, code, 0x1000).status, ReturnSiteStatus::kFound);
  code.insert(code.begin(), 0x90);
  EXPECT_EQ(find_return_sites(Machine::kX86_64, code, 0x1000).status, ReturnSiteStatus::kTooLarge);
}

// A symbol table claiming one entry more than kMaxSymbols (a sparse hole of zero entries).
std::string write_oversized_symtab(const testing::TempDir& dir) {
  const std::string path = dir.path() / "symbol-flood";
  SyntheticElf elf = tls_binary(64);
  elf.claimed_symtab_bytes = (kMaxSymbols + 1) * sizeof(Elf64_Sym);
  elf.write(path);
  return path;
}

TEST(LimitsTest, SymbolCountCapGivesTheTooLargeVerdict) {
  testing::TempDir dir;
  const std::string path = write_oversized_symtab(dir);
  auto targets = resolve_file(path, kTls);
  ASSERT_FALSE(targets.ok());
  EXPECT_TRUE(is_too_large(targets.error()));
  EXPECT_EQ(targets.error().code(), kTooLargeCode);
  EXPECT_NE(targets.error().message().find("too large to instrument: .symtab symbol count (" +
                                           std::to_string(kMaxSymbols + 1) + ") exceeds " +
                                           std::to_string(kMaxSymbols)),
            std::string::npos)
      << targets.error().message();
}

TEST(LimitsTest, CacheRemembersTheVerdictWithoutParsingAgain) {
  testing::TempDir dir;
  const std::string path = write_oversized_symtab(dir);
  ProbeTargetCache cache;
  for (int i = 0; i < 3; ++i) {
    auto targets = cache.resolve(path, kTls);
    ASSERT_FALSE(targets.ok());
    EXPECT_TRUE(is_too_large(targets.error())) << targets.error().message();
  }
  const ProbeTargetCacheStats stats = cache.stats();
  EXPECT_EQ(stats.parses, 1u);
  EXPECT_EQ(stats.too_large, 3u);
  EXPECT_EQ(stats.rejected, 1u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.entries, 0u);

  // A binary within the caps next to it is unaffected.
  const std::string fine = dir.path() / "fine";
  tls_binary(64).write(fine);
  auto targets = cache.resolve(fine, kTls);
  ASSERT_TRUE(targets.ok()) << targets.error().message();
  EXPECT_TRUE((*targets)[1].found);
}

TEST(LimitsTest, SectionCountCapGivesTheTooLargeVerdict) {
  // Extended numbering (e_shnum 0, the count in section 0's sh_size) allows 2^64 sections; a
  // table of one more than the cap, all present in the buffer, is refused before it is walked.
  const uint64_t count = kMaxSections + 1;
  std::vector<uint8_t> bytes(sizeof(Elf64_Ehdr) + count * sizeof(Elf64_Shdr), 0);
  Elf64_Ehdr ehdr{};
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_machine = EM_X86_64;
  ehdr.e_shoff = sizeof(Elf64_Ehdr);
  ehdr.e_shentsize = sizeof(Elf64_Shdr);
  std::memcpy(bytes.data(), &ehdr, sizeof(ehdr));
  Elf64_Shdr first{};
  first.sh_size = count;
  std::memcpy(bytes.data() + sizeof(ehdr), &first, sizeof(first));
  auto elf = ElfFile::parse(bytes);
  ASSERT_FALSE(elf.ok());
  EXPECT_TRUE(is_too_large(elf.error())) << elf.error().message();

  first.sh_size = kMaxSections;
  std::memcpy(bytes.data() + sizeof(ehdr), &first, sizeof(first));
  bytes.resize(sizeof(Elf64_Ehdr) + kMaxSections * sizeof(Elf64_Shdr));
  EXPECT_TRUE(ElfFile::parse(bytes).ok());
}

TEST(LimitsTest, FileOverTheSizeCapIsNotMapped) {
  testing::TempDir dir;
  const std::string path = dir.path() / "huge";
  tls_binary(64).write(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMaxBinaryBytes + 1)), 0);

  auto mapping = MappedFile::open(path);
  ASSERT_FALSE(mapping.ok());
  EXPECT_TRUE(is_too_large(mapping.error())) << mapping.error().message();

  ProbeTargetCache cache;
  auto targets = cache.resolve(path, kTls);
  ASSERT_FALSE(targets.ok());
  EXPECT_TRUE(is_too_large(targets.error()));
  EXPECT_EQ(cache.stats().rejected, 1u);

  // Callers parsing OpenBinary::bytes() themselves learn the verdict from check_bytes().
  auto binary = OpenBinary::open(path);
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  EXPECT_TRUE(binary->bytes().empty());
  Status checked = binary->check_bytes();
  ASSERT_FALSE(checked.ok());
  EXPECT_TRUE(is_too_large(checked.error())) << checked.error().message();
}

}  // namespace
}  // namespace sonde::symbols
