// Cache semantics a user of the agent would notice: one parse per real file whatever path it
// is reached through, a new parse when the file changes, absent names remembered, bounded size.
#include "agent/symbols/probe_target_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <latch>
#include <thread>

#include "agent/symbols/tests/temp_dir.h"

namespace sonde::symbols {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTls = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SONDE_GO_TLS_FIXTURE).empty()) GTEST_SKIP() << "go fixture not built";
    binary_ = dir_.path() / "app";
    fs::copy_file(SONDE_GO_TLS_FIXTURE, binary_);
  }
  testing::TempDir dir_;
  fs::path binary_;
};

TEST_F(CacheTest, HardLinkIsOneKeyAndOneParse) {
  const fs::path link = dir_.path() / "link";
  fs::create_hard_link(binary_, link);
  auto a = OpenBinary::open(binary_);
  auto b = OpenBinary::open(link);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->identity(), b->identity());

  ProbeTargetCache cache;
  auto first = cache.resolve(binary_, kTls);
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto second = cache.resolve(link, kTls);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().hits, 2u);
  EXPECT_EQ((*first)[0].address, (*second)[0].address);
  EXPECT_TRUE((*second)[0].found);
}

TEST_F(CacheTest, DistinctPathsOfOneFileParseOnce) {
  ProbeTargetCache cache;
  // Per-pid paths differ as strings; here symlinks and /proc/self/root stand in for them.
  for (int pid = 0; pid < 20; ++pid) {
    const fs::path p = dir_.path() / ("pid-" + std::to_string(pid));
    fs::create_symlink(binary_, p);
    auto r = cache.resolve(pid % 2 ? "/proc/self/root" + p.string() : p.string(), kTls);
    ASSERT_TRUE(r.ok()) << r.error().message();
  }
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().entries, kTls.size());
}

TEST_F(CacheTest, ModifiedCopyIsANewKey) {
  ProbeTargetCache cache;
  ASSERT_TRUE(cache.resolve(binary_, kTls).ok());
  const fs::path copy = dir_.path() / "copy";
  fs::copy_file(binary_, copy);
  {
    // Flip one byte in the middle of the file; the build-id note stays as it was.
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(copy) / 2));
    f.put('\x5a');
  }
  auto a = OpenBinary::open(binary_);
  auto b = OpenBinary::open(copy);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->identity(), b->identity());
  ASSERT_TRUE(cache.resolve(copy, kTls).ok());
  EXPECT_EQ(cache.stats().parses, 2u);
}

TEST_F(CacheTest, RewriteInPlaceAndReplacementAreNewKeys) {
  auto before = OpenBinary::open(binary_);
  ASSERT_TRUE(before.ok());
  const BinaryIdentity original = before->identity();
  {
    // Same inode, same size, new contents and mtime.
    std::fstream f(binary_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x01');
  }
  struct timespec times[2] = {{0, UTIME_OMIT}, {1'700'000'000, 123}};
  ASSERT_EQ(::utimensat(AT_FDCWD, binary_.c_str(), times, 0), 0);
  auto rewritten = OpenBinary::open(binary_);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(rewritten->identity().inode, original.inode);
  EXPECT_NE(rewritten->identity(), original);

  const fs::path next = dir_.path() / "next";
  fs::copy_file(SONDE_GO_TLS_FIXTURE, next);
  fs::rename(next, binary_);
  auto replaced = OpenBinary::open(binary_);
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(replaced->identity(), original);
  EXPECT_NE(replaced->identity(), rewritten->identity());
}

TEST_F(CacheTest, AbsentNameIsCachedAndNotReparsed) {
  ProbeTargetCache cache;
  const std::vector<std::string> names = {"uv__io_poll"};
  auto first = cache.resolve(binary_, names);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE((*first)[0].found);
  EXPECT_EQ(cache.stats().parses, 1u);
  auto second = cache.resolve(binary_, names);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE((*second)[0].found);
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(CacheTest, PartialHitParsesExactlyOnceForAllMissingNames) {
  ProbeTargetCache cache;
  const std::vector<std::string> one = {kTls[0]};
  ASSERT_TRUE(cache.resolve(binary_, one).ok());
  EXPECT_EQ(cache.stats().parses, 1u);
  const std::vector<std::string> more = {kTls[0], kTls[1], "main.main", "absent.symbol"};
  auto r = cache.resolve(binary_, more);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(cache.stats().parses, 2u);
  EXPECT_TRUE((*r)[1].found);
  EXPECT_TRUE((*r)[2].found);
  EXPECT_FALSE((*r)[3].found);
  ASSERT_TRUE(cache.resolve(binary_, more).ok());
  EXPECT_EQ(cache.stats().parses, 2u);
  auto all = cache.lookup(OpenBinary::open(binary_)->identity(), more);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ((*all)[1].address, (*r)[1].address);
}

TEST_F(CacheTest, CallersAskingDifferentNamesDoNotShadowEachOther) {
  ProbeTargetCache cache;
  const std::vector<std::string> node_probe = {"uv__io_poll"};
  ASSERT_TRUE(cache.resolve(binary_, node_probe).ok());
  auto tls = cache.resolve(binary_, kTls);
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE((*tls)[0].found);
  EXPECT_TRUE((*tls)[1].found);
}

TEST_F(CacheTest, LruBoundHoldsAndEvictsLeastRecentlyUsed) {
  ProbeTargetCache cache(3);
  const std::vector<std::string> names = {"a.1", "a.2", "a.3", "a.4", "a.5"};
  for (const auto& n : names) ASSERT_TRUE(cache.resolve(binary_, std::vector{n}).ok());
  auto s = cache.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.evictions, 2u);
  const auto id = OpenBinary::open(binary_)->identity();
  EXPECT_FALSE(cache.lookup(id, std::vector<std::string>{"a.1"}).has_value());
  EXPECT_TRUE(cache.lookup(id, std::vector<std::string>{"a.3"}).has_value());  // now most recent
  ASSERT_TRUE(cache.resolve(binary_, std::vector<std::string>{"a.6"}).ok());
  EXPECT_TRUE(cache.lookup(id, std::vector<std::string>{"a.3"}).has_value());
  EXPECT_FALSE(cache.lookup(id, std::vector<std::string>{"a.4"}).has_value());
  EXPECT_EQ(cache.stats().entries, 3u);
}

TEST_F(CacheTest, UnreadableAndMalformedBinariesAreNotCached) {
  ProbeTargetCache cache;
  auto missing = cache.resolve((dir_.path() / "nope").string(), kTls);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ENOENT);
  const fs::path script = dir_.path() / "script";
  std::ofstream(script) << "#!/bin/sh\n";
  EXPECT_FALSE(cache.resolve(script, kTls).ok());
  EXPECT_FALSE(cache.resolve(script, kTls).ok());
  const auto s = cache.stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.errors, 3u);
  EXPECT_EQ(s.parses, 0u);
}

bool mapped(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(path.string()) != std::string::npos) return true;
  }
  return false;
}

TEST_F(CacheTest, NothingOfTheFileStaysMapped) {
  ProbeTargetCache cache;
  ASSERT_TRUE(cache.resolve(binary_, kTls).ok());
  EXPECT_FALSE(mapped(binary_));
  auto binary = OpenBinary::open(binary_);
  ASSERT_TRUE(binary.ok());
  ASSERT_TRUE(cache.resolve(*binary, std::vector<std::string>{"main.main"}).ok());
  EXPECT_EQ(cache.stats().parses, 2u);
  EXPECT_FALSE(mapped(binary_));  // identifying and parsing through the cache leave no mapping
}

TEST_F(CacheTest, OpenBinaryMapsOnlyWhenBytesAreAsked) {
  {
    auto binary = OpenBinary::open(binary_);
    ASSERT_TRUE(binary.ok());
    EXPECT_FALSE(mapped(binary_));
    EXPECT_TRUE(ElfFile::parse(binary->bytes()).ok());
    EXPECT_TRUE(mapped(binary_));
  }
  EXPECT_FALSE(mapped(binary_));
}

TEST_F(CacheTest, PodsStartingTogetherShareOneParse) {
  ProbeTargetCache cache;
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const fs::path p = dir_.path() / ("pod-" + std::to_string(t));
      fs::create_symlink(binary_, p);
      start.arrive_and_wait();
      auto r = cache.resolve(p, kTls);
      if (!r.ok() || !(*r)[0].found || !(*r)[1].found) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, kThreads * kTls.size());
}

TEST_F(CacheTest, ConcurrentResolvesAgree) {
  ProbeTargetCache cache(8);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<std::string> names = kTls;
        names.push_back("x." + std::to_string((t * 50 + i) % 12));
        auto r = cache.resolve(binary_, names);
        if (!r.ok() || !(*r)[0].found || !(*r)[1].found || (*r)[2].found) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(cache.stats().entries, 8u);
}

}  // namespace
}  // namespace sonde::symbols
