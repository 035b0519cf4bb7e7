// The `symbolize` command and the symbolizer cache, on the Go test program, /usr/bin/node and
// the running kernel. Expected values come from go tool addr2line/nm, nm and /proc/kallsyms.
#include "agent/symbolize/symbolize_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "agent/symbolize/go_binary.h"
#include "agent/symbolize/kallsyms.h"
#include "agent/symbolize/symbolizer_cache.h"
#include "agent/symbolize/tests/go_test_binary.h"

namespace sonde::agent {
namespace {

using symbolize::testing::go_nm_address;
using symbolize::testing::run_command;

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// go tool addr2line's two lines for one address.
std::pair<std::string, std::string> addr2line(uint64_t address) {
  std::istringstream out(run_command("echo " + hex(address) + " | " + SONDE_GO_TOOLDIR +
                                     "/addr2line " + SONDE_GO_TEST_BINARY));
  std::string func, pos;
  std::getline(out, func);
  std::getline(out, pos);
  return {func, pos};
}

TEST(SymbolizeCommand, GoFunctionFileLineAndInlinedFrames) {
  uint64_t main_main = go_nm_address(SONDE_GO_TOOLDIR, SONDE_GO_TEST_BINARY, "main.main");
  ASSERT_NE(main_main, 0u);
  // An address inside an inlined call: the first pc from main.main on with more than one frame.
  auto go = symbolize::GoBinary::open(SONDE_GO_TEST_BINARY);
  ASSERT_TRUE(go.ok());
  uint64_t inlined_pc = 0;
  uint64_t inlined_entry = 0;
  for (uint64_t pc = main_main; pc < (*go)->pclntab().max_pc() && inlined_pc == 0; ++pc) {
    std::array<symbolize::GoFrame, 4> frames;
    size_t n = (*go)->pclntab().lookup_frames(pc, frames);
    if (n > 1) {
      inlined_pc = pc;
      inlined_entry = frames[n - 1].entry;
    }
  }
  ASSERT_NE(inlined_pc, 0u);

  auto r = run_symbolize(
      {"--json", SONDE_GO_TEST_BINARY_STRIPPED, hex(main_main), std::to_string(inlined_pc)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);

  auto [func0, pos0] = addr2line(main_main);
  EXPECT_EQ(j[0]["address"], hex(main_main));
  EXPECT_EQ(j[0]["function"], func0);
  EXPECT_EQ(j[0]["offset"], 0);
  EXPECT_EQ(j[0]["file"].get<std::string>() + ":" + std::to_string(j[0]["line"].get<int>()), pos0);
  EXPECT_TRUE(j[0]["inlined"].empty());

  // addr2line names the physical function with the innermost position.
  auto [func1, pos1] = addr2line(inlined_pc);
  EXPECT_EQ(j[1]["function"], func1);
  EXPECT_EQ(j[1]["offset"], inlined_pc - inlined_entry);
  ASSERT_FALSE(j[1]["inlined"].empty());
  const auto& inner = j[1]["inlined"][0];
  EXPECT_EQ(inner["file"].get<std::string>() + ":" + std::to_string(inner["line"].get<int>()),
            pos1);
}

TEST(SymbolizeCommand, NativeBinaryDemangledAndMissingAddress) {
  if (access("/usr/bin/node", R_OK) != 0) GTEST_SKIP() << "/usr/bin/node not installed";
  std::istringstream nm(run_command("nm /usr/bin/node | grep -E ' t uv__io_poll$'"));
  std::string addr;
  nm >> addr;
  ASSERT_FALSE(addr.empty());
  uint64_t a = std::stoull(addr, nullptr, 16);
  auto r = run_symbolize({"/usr/bin/node", hex(a + 3), "0x10"});
  EXPECT_EQ(r.exit_code, 1);  // 0x10 is in no function
  EXPECT_EQ(r.out, "uv__io_poll+0x3\n??:0\n\n??\n??:0\n\n");

  // A return address right after uv__io_poll's first byte is attributed to the call before it;
  // the first byte itself as a return address belongs to whatever precedes the function.
  r = run_symbolize({"--return-addresses", "/usr/bin/node", hex(a + 1)});
  EXPECT_EQ(r.out, "uv__io_poll+0x0\n??:0\n\n");
  r = run_symbolize({"--return-addresses", "/usr/bin/node", hex(a)});
  EXPECT_EQ(r.out.find("uv__io_poll"), std::string::npos) << r.out;
}

TEST(SymbolizeCommand, KernelAddresses) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for kallsyms addresses";
  auto table = symbolize::KallsymsTable::read("/proc");
  ASSERT_TRUE(table.ok());
  auto want = table->at(table->size() / 2);
  auto r = run_symbolize({"--kernel", "--json", hex(want.address + 1)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // The kallsyms line at that address names it (one of possibly several aliases).
  // Built with append: GCC 12 at -O3 reports a false -Wrestrict on "literal" + std::string.
  std::string command = "grep -i '^0*";
  command.append(hex(want.address).substr(2)).append(" ' /proc/kallsyms");
  std::string line = run_command(command);
  std::string name = " ";
  name.append(j[0]["function"].get<std::string>());
  EXPECT_NE(line.find(name), std::string::npos) << line;
  EXPECT_EQ(j[0]["offset"], 1);
}

TEST(SymbolizeCommand, UsageErrors) {
  EXPECT_EQ(run_symbolize({}).exit_code, 2);
  EXPECT_EQ(run_symbolize({SONDE_GO_TEST_BINARY}).exit_code, 2);
  EXPECT_EQ(run_symbolize({SONDE_GO_TEST_BINARY, "zz"}).exit_code, 2);
  EXPECT_EQ(run_symbolize({"--bogus", SONDE_GO_TEST_BINARY, "0x1"}).exit_code, 2);
  auto missing = run_symbolize({"/nonexistent/binary", "0x1000"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/binary"), std::string::npos);
  EXPECT_EQ(run_symbolize({"--help"}).exit_code, 0);
}

TEST(SymbolizerCache, KeyedByIdentityNotPathAndBoundedByBytes) {
  symbolize::SymbolizerCache cache;
  auto a = cache.get(SONDE_GO_TEST_BINARY);
  ASSERT_TRUE(a.ok()) << a.error().message();
  auto b = cache.get(std::string("/proc/self/root") + SONDE_GO_TEST_BINARY);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->get(), b->get());
  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, (*a)->memory_bytes());

  // A budget that holds one of the two Go binaries: the least recently used one goes.
  symbolize::SymbolizerCache small((*a)->memory_bytes() + 1024);
  ASSERT_TRUE(small.get(SONDE_GO_TEST_BINARY).ok());
  ASSERT_TRUE(small.get(SONDE_GO_TEST_BINARY_STRIPPED).ok());
  s = small.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_LE(s.bytes, (*a)->memory_bytes() + 1024);
  ASSERT_TRUE(small.get(SONDE_GO_TEST_BINARY_STRIPPED).ok());
  EXPECT_EQ(small.stats().hits, 1u);

  EXPECT_FALSE(cache.get("/nonexistent/binary").ok());
  EXPECT_EQ(cache.stats().entries, 1u);
}

}  // namespace
}  // namespace sonde::agent
