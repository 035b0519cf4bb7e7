// ElfSymbolizer against llvm-symbolizer on /usr/bin/node (Node 20, ~109k .symtab entries).
#include "agent/symbolize/elf_symbolizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "agent/symbolize/tests/go_test_binary.h"

namespace sonde::symbolize {
namespace {

constexpr char kNode[] = "/usr/bin/node";

TEST(ElfSymbolizer, AgreesWithLlvmSymbolizerOnNode) {
  if (access(kNode, R_OK) != 0) GTEST_SKIP() << kNode << " not installed";
  auto sym = ElfSymbolizer::open(kNode);
  ASSERT_TRUE(sym.ok()) << sym.error().message();
  EXPECT_GT((*sym)->size(), 50000u);
  auto text = testing::readelf_section(kNode, ".text");
  ASSERT_TRUE(text);

  std::mt19937_64 rng(17);
  std::vector<uint64_t> addrs(10000);
  for (auto& a : addrs) a = text->addr + rng() % text->size;
  std::string in_path =
      ::testing::TempDir() + "/sonde-node-addrs-" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream in(in_path);
    for (uint64_t a : addrs) in << "0x" << std::hex << a << "\n";
  }
  std::istringstream out(testing::run_command(
      std::string("llvm-symbolizer --no-inlines --no-demangle --obj=") + kNode + " < " + in_path));
  (void)std::remove(in_path.c_str());

  size_t agree = 0, disagree = 0;
  std::string want, location, blank;
  for (uint64_t a : addrs) {
    ASSERT_TRUE(std::getline(out, want) && std::getline(out, location) && std::getline(out, blank));
    auto hit = (*sym)->lookup(a);
    std::string got = hit ? std::string(hit->name) : "??";
    if (got == want) {
      ++agree;
      continue;
    }
    if (++disagree <= 20) {
      std::cout << "disagreement: 0x" << std::hex << a << ": got " << got << ", llvm-symbolizer "
                << want << std::dec << "\n";
    }
  }
  double rate = static_cast<double>(agree) / static_cast<double>(addrs.size());
  RecordProperty("agreement", std::to_string(rate));
  EXPECT_GE(rate, 0.999) << agree << " of " << addrs.size();
}

TEST(ElfSymbolizer, Demangles) {
  EXPECT_EQ(demangle("_ZN4node11Environment10RunCleanupEv"), "node::Environment::RunCleanup()");
  EXPECT_EQ(demangle("uv__io_poll"), "uv__io_poll");
  EXPECT_EQ(demangle("_Znot_valid"), "_Znot_valid");
}

TEST(ElfSymbolizer, NotElfIsAnError) {
  std::vector<uint8_t> junk(256, 0x41);
  EXPECT_FALSE(ElfSymbolizer::from_bytes(junk).ok());
}

}  // namespace
}  // namespace sonde::symbolize
