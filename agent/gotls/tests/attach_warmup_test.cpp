// AttachWarmup's bounds with a fake attach: one warm-up in flight, none within the interval,
// requests past them dropped and counted, a failed attach counted; the file it attaches to is the
// agent's memfd of NOPs. The real kernel attach: tls_probes_bpf_test.
#include "agent/gotls/attach_warmup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

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
  int calls = 0;
  auto w = AttachWarmup::create(
      [&](const std::string&) -> Result<std::unique_ptr<Attachment>> {
        if (++calls == 2) return Error("refused", 1);
        return std::unique_ptr<Attachment>(std::make_unique<Attachment>());
      },
      /*min_interval_ns=*/1'000'000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->request());
  ASSERT_TRUE(eventually([&] { return (*w)->done() == 1; }));
  std::this_thread::sleep_for(2ms);
  EXPECT_TRUE((*w)->request());
  ASSERT_TRUE(eventually([&] { return (*w)->failed() == 1; }));
  EXPECT_EQ((*w)->done(), 1u);
  EXPECT_EQ((*w)->skipped(), 0u);
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
