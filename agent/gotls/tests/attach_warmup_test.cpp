// AttachWarmup's bounds with a fake attach and a manual clock: one warm-up in flight, none within
// the interval, requests past them dropped and counted, a failed attach counted, a file asked for
// once its warm-up was accepted; the file it attaches to is the agent's memfd of NOPs. The real
// kernel attach: tls_probes_bpf_test.
#include "agent/gotls/attach_warmup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

using namespace std::chrono_literals;

// Waits up to 10 s for `done`.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

class Gate {
 public:
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(AttachWarmupTest, OneInFlightAndNoneWithinTheIntervalTheRestSkipped) {
  Gate gate;
  std::mutex mu;
  std::string contents;
  int calls = 0;
  auto w = AttachWarmup::create(
      [&](const std::string& path) -> Result<std::unique_ptr<Attachment>> {
        std::ifstream in(path, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        {
          std::lock_guard lock(mu);
          contents = bytes;
          ++calls;
        }
        gate.wait();
        return std::unique_ptr<Attachment>(std::make_unique<Attachment>());
      },
      /*min_interval_ns=*/3'600'000'000'000ULL);
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_TRUE((*w)->request());
  EXPECT_FALSE((*w)->request()) << "one in flight";
  gate.open();
  ASSERT_TRUE(eventually([&] { return (*w)->done() == 1; }));
  EXPECT_FALSE((*w)->request()) << "within the interval";
  EXPECT_EQ((*w)->skipped(), 2u);
  EXPECT_EQ((*w)->failed(), 0u);
  std::lock_guard lock(mu);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(contents, std::string(16, '\x90')) << "the memfd of NOPs";
}

TEST(AttachWarmupTest, AfterTheIntervalAnotherStartsAndAFailureIsCounted) {
  ::sonde::testing::ManualClock clock;
  int calls = 0;
  auto w = AttachWarmup::create(
      [&](const std::string&) -> Result<std::unique_ptr<Attachment>> {
        if (++calls == 2) return Error("refused", 1);
        return std::unique_ptr<Attachment>(std::make_unique<Attachment>());
      },
      /*min_interval_ns=*/1'000'000, clock);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->request());
  ASSERT_TRUE(eventually([&] { return (*w)->done() == 1; }));
  clock.advance_ns(999'999);
  EXPECT_FALSE((*w)->request()) << "1 ns short of the interval";
  clock.advance_ns(1);
  EXPECT_TRUE((*w)->request());
  ASSERT_TRUE(eventually([&] { return (*w)->failed() == 1; }));
  EXPECT_EQ((*w)->done(), 1u);
  EXPECT_EQ((*w)->skipped(), 1u);
}

// The exec of a file warmed up before asks nothing; a file whose request the bounds dropped is
// asked for again at its next exec (it was not remembered).
TEST(AttachWarmupTest, AFileIsRememberedOnlyOnceItsWarmupWasAccepted) {
  ::sonde::testing::ManualClock clock;
  auto w = AttachWarmup::create(
      [](const std::string&) -> Result<std::unique_ptr<Attachment>> {
        return std::unique_ptr<Attachment>(std::make_unique<Attachment>());
      },
      /*min_interval_ns=*/1'000'000, clock);
  ASSERT_TRUE(w.ok());
  const AttachWarmup::File a{.dev = 1, .ino = 10, .size = 100, .mtime_ns = 5};
  const AttachWarmup::File b{.dev = 1, .ino = 11, .size = 100, .mtime_ns = 5};
  EXPECT_TRUE((*w)->request_for(a));
  ASSERT_TRUE(eventually([&] { return (*w)->done() == 1; }));
  EXPECT_FALSE((*w)->request_for(b)) << "within the interval: dropped";
  EXPECT_EQ((*w)->skipped(), 1u);
  clock.advance_ns(1'000'000);
  EXPECT_FALSE((*w)->request_for(a)) << "warmed up before: not asked";
  EXPECT_EQ((*w)->skipped(), 1u) << "a known file is not a dropped request";
  EXPECT_TRUE((*w)->request_for(b)) << "dropped before, so not remembered";
  ASSERT_TRUE(eventually([&] { return (*w)->done() == 2; }));
  clock.advance_ns(1'000'000);
  EXPECT_FALSE((*w)->request_for(b));
  EXPECT_EQ((*w)->done(), 2u);
}

// A binary rebuilt at the same path is another file; the same file through another name is not.
TEST(AttachWarmupTest, AFileIsItsInodeSizeAndMtimeNotItsPath) {
  char dir_template[] = "/tmp/sonde-warmup-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template, path = dir + "/app", link = dir + "/link";
  auto write = [](const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  };
  write(path, "build 1");
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  auto first = AttachWarmup::File::of(path);
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto through_link = AttachWarmup::File::of(link);
  ASSERT_TRUE(through_link.ok());
  EXPECT_EQ(*first, *through_link);
  // Rebuilt: a new file renamed over the path, as `go build -o` and `cp` + `mv` do.
  write(path + ".new", "build 2");
  ASSERT_EQ(rename((path + ".new").c_str(), path.c_str()), 0);
  auto second = AttachWarmup::File::of(path);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*first, *second);
  EXPECT_FALSE(AttachWarmup::File::of(dir + "/missing").ok());
  std::filesystem::remove_all(dir);
}

TEST(AttachWarmupTest, DestroyedWithARequestPendingOrNoneStopsPromptly) {
  auto w = AttachWarmup::create(
      [](const std::string&) -> Result<std::unique_ptr<Attachment>> {
        return std::unique_ptr<Attachment>(std::make_unique<Attachment>());
      },
      1);
  ASSERT_TRUE(w.ok());
  (*w)->request();
  w = Error("gone");  // destroys it: joins its thread
  SUCCEED();
}

}  // namespace
}  // namespace sonde::agent
