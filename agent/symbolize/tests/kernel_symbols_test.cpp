// KernelSymbols' incremental BPF updates on a fixture kallsyms; the sysfs CPU list parser.
#include "agent/symbolize/kernel_symbols.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "agent/symbolize/perf_ksymbol_events.h"

namespace sonde::symbolize {
namespace {

class KernelSymbolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(mkdtemp(dir_), nullptr);
    write(
        "ffffffff81000000 T _stext\n"
        "ffffffff81000100 T do_one\n"
        "ffffffffa0000000 t bpf_prog_aaaaaaaaaaaaaaaa_old\t[bpf]\n"
        "ffffffffa0000800 t bpf_prog_bbbbbbbbbbbbbbbb_kept\t[bpf]\n"
        "ffffffffc0200000 t nft_do_chain\t[nf_tables]\n");
  }
  void TearDown() override {
    (void)std::remove((std::string(dir_) + "/kallsyms").c_str());
    rmdir(dir_);
  }
  void write(const std::string& text) {
    std::ofstream out(std::string(dir_) + "/kallsyms");
    out << text;
  }
  char dir_[32] = "/tmp/sonde-ksyms-XXXXXX";
};

TEST_F(KernelSymbolsTest, AddedSymbolsResolveWithinTheirRangeOnly) {
  auto k = KernelSymbols::load(dir_);
  ASSERT_TRUE(k.ok()) << k.error().message();
  EXPECT_EQ(k->full_reads(), 1u);
  k->add_bpf(0xffffffffa0001000, 0xffffffffa0001040, "bpf_prog_cccccccccccccccc_new");
  auto s = k->lookup(0xffffffffa0001010);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "bpf_prog_cccccccccccccccc_new");
  EXPECT_EQ(s->module, "bpf");
  EXPECT_EQ(s->offset, 0x10u);
  s = k->lookup(0xffffffffa0001040);  // past its end: the table's preceding symbol
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "bpf_prog_bbbbbbbbbbbbbbbb_kept");

  k->remove_bpf(0xffffffffa0001000);
  s = k->lookup(0xffffffffa0001010);
  ASSERT_TRUE(s);
  EXPECT_NE(s->name, "bpf_prog_cccccccccccccccc_new");
  EXPECT_EQ(k->overlay_size(), 0u);
  EXPECT_EQ(k->full_reads(), 1u);
}

TEST_F(KernelSymbolsTest, RemovingASymbolOfTheFullReadHidesIt) {
  auto k = KernelSymbols::load(dir_);
  ASSERT_TRUE(k.ok());
  k->remove_bpf(0xffffffffa0000000);
  EXPECT_FALSE(k->lookup(0xffffffffa0000010));
  // Not a BPF symbol: removal is ignored.
  k->remove_bpf(0xffffffff81000100);
  ASSERT_TRUE(k->lookup(0xffffffff81000100));
  // Re-added at the same address (a new program in the freed slot).
  k->add_bpf(0xffffffffa0000000, 0xffffffffa0000100, "bpf_prog_dddddddddddddddd_again");
  auto s = k->lookup(0xffffffffa0000010);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "bpf_prog_dddddddddddddddd_again");
}

TEST_F(KernelSymbolsTest, ReloadReplacesOverlayAndCounts) {
  auto k = KernelSymbols::load(dir_);
  ASSERT_TRUE(k.ok());
  k->add_bpf(0xffffffffa0001000, 0xffffffffa0001040, "bpf_prog_cccccccccccccccc_new");
  k->remove_bpf(0xffffffffa0000000);
  write("ffffffff81000000 T _stext\nffffffffa0000000 t bpf_prog_eeeeeeeeeeeeeeee_x\t[bpf]\n");
  ASSERT_TRUE(k->reload().ok());
  EXPECT_EQ(k->full_reads(), 2u);
  EXPECT_EQ(k->overlay_size(), 0u);
  auto s = k->lookup(0xffffffffa0000000);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "bpf_prog_eeeeeeeeeeeeeeee_x");

  // A failed reload keeps the previous state.
  write("garbage\n");
  EXPECT_FALSE(k->reload().ok());
  EXPECT_EQ(k->full_reads(), 2u);
  EXPECT_TRUE(k->lookup(0xffffffffa0000000));
}

}  // namespace
}  // namespace sonde::symbolize

namespace sonde::symbolize {
namespace {

TEST(ParseCpuList, RangesAndSingles) {
  auto cpus = parse_cpu_list("0-2,5,7-8\n");
  ASSERT_TRUE(cpus.ok()) << cpus.error().message();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 5, 7, 8}));
  for (const char* bad : {"", "\n", "1-", "3-1", "a", "0,,1", "1000000000"}) {
    EXPECT_FALSE(parse_cpu_list(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace sonde::symbolize
