// `sonde-agent symbols`: the JSON shape promised by the issue, exit codes and error messages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/commands.h"
#include "agent/symbols/symbol_resolver.h"
#include "agent/symbols/tests/temp_dir.h"

namespace sonde::agent {
namespace {

struct CommandRun {
  int status = 0;
  std::string out;
  std::string err;
};

// Runs symbols_main with stdout and stderr redirected to files.
CommandRun run(std::vector<std::string> args) {
  symbols::testing::TempDir dir;
  const std::string out_path = (dir.path() / "out").string();
  const std::string err_path = (dir.path() / "err").string();
  std::vector<char*> argv;
  args.insert(args.begin(), "symbols");
  for (auto& a : args) argv.push_back(a.data());
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(STDOUT_FILENO);
  const int saved_err = ::dup(STDERR_FILENO);
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  CommandRun r;
  r.status = symbols_main(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, STDOUT_FILENO);
  ::dup2(saved_err, STDERR_FILENO);
  for (int fd : {saved_out, saved_err, out_fd, err_fd}) ::close(fd);
  std::stringstream o, e;
  o << std::ifstream(out_path).rdbuf();
  e << std::ifstream(err_path).rdbuf();
  r.out = o.str();
  r.err = e.str();
  return r;
}

const std::vector<std::string> kNames = {"uv__io_poll", "uv__async_io", "not_in_node"};

TEST(SymbolsCommand, JsonHasTheDocumentedShapeAndAgreesWithResolve) {
  if (::access("/usr/bin/node", R_OK) != 0) GTEST_SKIP() << "/usr/bin/node is not installed";
  std::vector<std::string> args = {"--json", "/usr/bin/node"};
  args.insert(args.end(), kNames.begin(), kNames.end());
  const CommandRun r = run(args);
  EXPECT_EQ(r.status, 1);  // one name is missing
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc.contains("binary"));
  EXPECT_EQ(doc["binary"]["path"], "/usr/bin/node");
  EXPECT_TRUE(doc["binary"]["inode"].is_number_integer());
  const auto expected = symbols::resolve_file("/usr/bin/node", kNames);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(doc["symbols"].size(), kNames.size());
  const std::set<std::string> keys = {"name",        "found", "address",
                                      "file_offset", "size",  "return_offsets"};
  for (size_t i = 0; i < kNames.size(); ++i) {
    const auto& s = doc["symbols"][i];
    std::set<std::string> got;
    for (const auto& [k, v] : s.items()) got.insert(k);
    EXPECT_EQ(got, keys);
    const auto& t = (*expected)[i];
    EXPECT_EQ(s["name"], t.name);
    EXPECT_EQ(s["found"], t.found);
    EXPECT_TRUE(s["address"].is_number_unsigned());
    EXPECT_EQ(s["address"].get<uint64_t>(), t.address);
    EXPECT_EQ(s["file_offset"].get<uint64_t>(), t.file_offset);
    EXPECT_EQ(s["size"].get<uint64_t>(), t.size);
    EXPECT_EQ(s["return_offsets"].template get<std::vector<uint32_t>>(), t.return_offsets);
  }
}

TEST(SymbolsCommand, TableSaysWhenThereIsNoReturnSite) {
  if (::access("/usr/bin/node", R_OK) != 0) GTEST_SKIP() << "/usr/bin/node is not installed";
  const CommandRun r = run({"/usr/bin/node", "uv__async_io", "uv__io_poll"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("gnu-build-id="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none (tail-call-only"), std::string::npos) << r.out;
}

TEST(SymbolsCommand, ErrorsAndUsage) {
  CommandRun r = run({"/nonexistent/binary", "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("open /nonexistent/binary"), std::string::npos) << r.err;
  r = run({"/etc/hostname", "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not an ELF"), std::string::npos) << r.err;
  r = run({"/usr/bin/node"});
  EXPECT_EQ(r.status, 2);
  r = run({"--bogus", "/usr/bin/node", "x"});
  EXPECT_EQ(r.status, 2);
  r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Usage: sonde-agent symbols"), std::string::npos);
}

}  // namespace
}  // namespace sonde::agent
