// The symbolizers keep names in the binary's mapping for as long as they live: a binary
// truncated under them must not kill the agent on a later lookup, and an oversized one gets
// the "too large" verdict instead of a table sized by the tenant.
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "agent/symbolize/binary_symbolizer.h"
#include "agent/symbolize/elf_symbolizer.h"
#include "agent/symbols/limits.h"
#include "agent/symbols/tests/synthetic_elf.h"
#include "agent/symbols/tests/temp_dir.h"

namespace sonde::symbolize {
namespace {

using symbols::testing::SyntheticElf;
using symbols::testing::TempDir;

constexpr uint64_t kTextBytes = 1 << 20;
constexpr uint64_t kFunctionAddr = SyntheticElf::kTextAddr + 0x1000;

std::string write_binary(const TempDir& dir, uint64_t claimed_symtab_bytes = 0) {
  const std::string path = dir.path() / "app";
  SyntheticElf elf;
  elf.text_size = kTextBytes;
  elf.functions = {{"main.handler", 0x1000, 64}};
  elf.text = {{0x1000, std::vector<uint8_t>(64, 0xc3)}};
  elf.claimed_symtab_bytes = claimed_symtab_bytes;
  elf.write(path);
  return path;
}

TEST(SymbolizerSafety, ElfSymbolizerLookupsSurviveTruncation) {
  TempDir dir;
  const std::string path = write_binary(dir);
  auto sym = ElfSymbolizer::open(path);
  ASSERT_TRUE(sym.ok()) << sym.error().message();
  auto before = (*sym)->lookup(kFunctionAddr + 8);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->name, "main.handler");

  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  // The name lived in the string table past the new end: it now reads as zeros.
  auto after = (*sym)->lookup(kFunctionAddr + 8);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->name, "");
}

TEST(SymbolizerSafety, BinarySymbolizerReportsTheChangedFile) {
  TempDir dir;
  const std::string path = write_binary(dir);
  auto sym = BinarySymbolizer::open(path);
  ASSERT_TRUE(sym.ok()) << sym.error().message();
  std::array<SymbolizedFrame, 4> frames;
  ASSERT_EQ((*sym)->symbolize(kFunctionAddr, frames), 1u);
  EXPECT_EQ(frames[0].function, "main.handler");
  EXPECT_FALSE((*sym)->file_changed());

  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  (*sym)->symbolize(kFunctionAddr, frames);
  EXPECT_TRUE((*sym)->file_changed());

  // Opening it again sees the truncated file: an error, not a crash.
  EXPECT_FALSE(BinarySymbolizer::open(path).ok());
}

TEST(SymbolizerSafety, SymbolCountOverTheCapIsTooLarge) {
  TempDir dir;
  const std::string path = write_binary(dir, (symbols::kMaxSymbols + 1) * sizeof(Elf64_Sym));
  auto elf = ElfSymbolizer::open(path);
  ASSERT_FALSE(elf.ok());
  EXPECT_TRUE(symbols::is_too_large(elf.error())) << elf.error().message();
  auto any = BinarySymbolizer::open(path);
  ASSERT_FALSE(any.ok());
  EXPECT_TRUE(symbols::is_too_large(any.error())) << any.error().message();
}

}  // namespace
}  // namespace sonde::symbolize
