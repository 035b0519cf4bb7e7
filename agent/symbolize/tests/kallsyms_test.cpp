// KallsymsTable against fixtures and against the running kernel's /proc/kallsyms (needs root
// to see real addresses; skipped otherwise).
#include "agent/symbolize/kallsyms.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

namespace sonde::symbolize {
namespace {

constexpr char kFixture[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 t __startup_alias\n"
    "ffffffff81000100 T do_one\n"
    "ffffffff81000200 t helper\n"
    "ffffffff81000300 W weak_thing\n"
    "ffffffffc0200000 t nft_do_chain\t[nf_tables]\n"
    "ffffffffc0200080 T nft_register\t[nf_tables]\n"
    "ffffffffa0001000 t bpf_prog_6deef7357e7b4530_sd_fw\t[bpf]\n"
    "ffffffffc0100000 t ext4_thing\t[ext4]\n";

TEST(KallsymsTable, ParsesSortsAndKeepsModules) {
  auto table = KallsymsTable::parse(kFixture);
  ASSERT_TRUE(table.ok()) << table.error().message();
  EXPECT_EQ(table->size(), 9u);
  for (size_t i = 1; i < table->size(); ++i) {
    EXPECT_LE(table->at(i - 1).address, table->at(i).address);
  }

  auto s = table->lookup(0xffffffff81000150);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "do_one");
  EXPECT_EQ(s->module, "");
  EXPECT_EQ(s->type, 'T');
  EXPECT_EQ(s->offset, 0x50u);

  s = table->lookup(0xffffffffc0200090);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "nft_register");
  EXPECT_EQ(s->module, "nf_tables");

  s = table->lookup(0xffffffffa0001010);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "bpf_prog_6deef7357e7b4530_sd_fw");
  EXPECT_EQ(s->module, "bpf");

  // Listed after nf_tables in the file but lower in memory.
  s = table->lookup(0xffffffffc0100004);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "ext4_thing");
  EXPECT_EQ(s->module, "ext4");
}

TEST(KallsymsTable, PrefersGlobalSymbolAtSharedAddress) {
  auto table = KallsymsTable::parse(kFixture);
  ASSERT_TRUE(table.ok());
  auto s = table->lookup(0xffffffff81000000);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "_stext");
  EXPECT_EQ(s->offset, 0u);
}

TEST(KallsymsTable, BelowFirstSymbolIsNotFound) {
  auto table = KallsymsTable::parse(kFixture);
  ASSERT_TRUE(table.ok());
  EXPECT_FALSE(table->lookup(0x1000));
  auto empty = KallsymsTable::parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->lookup(0xffffffff81000000));
}

TEST(KallsymsTable, MalformedLinesAreErrorsWithLineNumbers) {
  const char* bad[] = {
      "zzzz T name\n",
      "ffffffff81000000T name\n",
      "ffffffff81000000 T \n",
      "ffffffff81000000 T name\tnf_tables\n",
      "1ffffffff81000000 T name\n",
      "ffffffff81000000 T",
  };
  for (const char* text : bad) {
    auto table = KallsymsTable::parse(std::string("ffffffff81000000 T ok\n") + text);
    ASSERT_FALSE(table.ok()) << text;
    EXPECT_NE(table.error().message().find("line 2"), std::string::npos) << table.error().message();
  }
}

TEST(KallsymsTable, ReadsFromProcRootParameter) {
  char dir[] = "/tmp/sonde-kallsyms-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  {
    std::ofstream out(std::string(dir) + "/kallsyms");
    out << kFixture;
  }
  auto table = KallsymsTable::read(dir);
  ASSERT_TRUE(table.ok()) << table.error().message();
  EXPECT_EQ(table->size(), 9u);

  {
    std::ofstream out(std::string(dir) + "/kallsyms");
    out << "0000000000000000 T _stext\n0000000000000000 T do_one\n";
  }
  auto hidden = KallsymsTable::read(dir);
  ASSERT_FALSE(hidden.ok());
  EXPECT_NE(hidden.error().message().find("kptr_restrict"), std::string::npos);

  auto missing = KallsymsTable::read(std::string(dir) + "/nope");
  EXPECT_FALSE(missing.ok());
  (void)std::remove((std::string(dir) + "/kallsyms").c_str());
  rmdir(dir);
}

// Ground truth: /proc/kallsyms itself, parsed here independently with iostreams. For sampled
// addresses, the reported name must be one of the names listed at the greatest address <= it.
TEST(KallsymsTable, AgreesWithProcKallsyms) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to see kernel addresses";
  auto text = read_proc_file("/proc/kallsyms");
  ASSERT_TRUE(text.ok()) << text.error().message();

  std::map<uint64_t, std::set<std::string>> names_at;
  std::map<uint64_t, std::string> module_at;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string addr, type, name, module;
    fields >> addr >> type >> name >> module;
    uint64_t a = std::stoull(addr, nullptr, 16);
    names_at[a].insert(name);
    module_at[a] = module.empty() ? "" : module.substr(1, module.size() - 2);
  }

  auto table = KallsymsTable::parse(*text);
  ASSERT_TRUE(table.ok()) << table.error().message();
  ASSERT_GT(table->size(), 1000u);

  std::mt19937_64 rng(42);
  size_t checked = 0;
  for (auto it = names_at.begin(); it != names_at.end(); ++it) {
    auto next = std::next(it);
    if (next == names_at.end() || it->first == 0) continue;
    uint64_t span = next->first - it->first;
    for (uint64_t probe : {it->first, it->first + rng() % span, next->first - 1}) {
      auto s = table->lookup(probe);
      ASSERT_TRUE(s) << std::hex << probe;
      ASSERT_EQ(s->address, it->first) << std::hex << probe;
      ASSERT_TRUE(it->second.count(std::string(s->name))) << s->name << " at " << std::hex << probe;
      ASSERT_EQ(s->module, module_at[it->first]);
      ++checked;
    }
  }
  EXPECT_GT(checked, 3000u);
}

TEST(KallsymsTable, CompactAndFastOnTheRunningKernel) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to see kernel addresses";
  auto text = read_proc_file("/proc/kallsyms");
  ASSERT_TRUE(text.ok());
  auto start = std::chrono::steady_clock::now();
  auto table = KallsymsTable::parse(*text);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(table.ok());
  double per_symbol = static_cast<double>(table->table_bytes()) / table->size();
  EXPECT_LT(per_symbol, 16.0);
  RecordProperty("parse_ms",
                 std::to_string(std::chrono::duration<double, std::milli>(elapsed).count()));
  RecordProperty("bytes_per_symbol", std::to_string(per_symbol));
}

}  // namespace
}  // namespace sonde::symbolize
