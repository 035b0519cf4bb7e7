#include "common/kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "common/testing/manual_clock.h"

namespace sonde::kube {
namespace {

using ::sonde::testing::ManualClock;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WorkQueueTest, NeverHoldsAnItemTwice) {
  ManualClock clock;
  WorkQueue queue(clock);
  queue.add("a");
  queue.add("b");
  queue.add("a");
  EXPECT_EQ(queue.len(), 2u);
  EXPECT_EQ(*queue.get(), "a");
  EXPECT_EQ(*queue.get(), "b");
}

TEST(WorkQueueTest, AnItemAddedWhileProcessingWaitsForDone) {
  ManualClock clock;
  WorkQueue queue(clock);
  queue.add("a");
  auto item = queue.get();
  queue.add("a");
  queue.add("a");
  EXPECT_EQ(queue.len(), 0u) << "a is being processed; it must not be handed out again";
  queue.done(*item);
  EXPECT_EQ(queue.len(), 1u) << "and comes back exactly once after done()";
  EXPECT_EQ(*queue.get(), "a");
  queue.done("a");
  EXPECT_EQ(queue.len(), 0u);
}

TEST(WorkQueueTest, DelayedItemsWaitForTheClock) {
  ManualClock clock;
  WorkQueue queue(clock);
  queue.add_after("late", seconds(5));
  queue.add_after("late", seconds(2));  // the earlier deadline wins
  queue.add_after("later", seconds(10));
  std::atomic<int> got{0};
  std::thread worker([&] {
    while (auto item = queue.get()) {
      ++got;
      queue.done(*item);
    }
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(got.load(), 0);
  clock.advance(seconds(2));
  while (got.load() < 1) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(queue.delayed(), 1u);
  clock.advance(seconds(8));
  while (got.load() < 2) std::this_thread::sleep_for(milliseconds(1));
  queue.shut_down();
  worker.join();
  EXPECT_EQ(got.load(), 2);
}

TEST(WorkQueueTest, PerItemExponentialBackoffAndForget) {
  ItemExponentialRateLimiter limiter(milliseconds(5), seconds(1));
  EXPECT_EQ(limiter.when("a"), milliseconds(5));
  EXPECT_EQ(limiter.when("a"), milliseconds(10));
  EXPECT_EQ(limiter.when("a"), milliseconds(20));
  EXPECT_EQ(limiter.when("b"), milliseconds(5)) << "items back off independently";
  for (int i = 0; i < 20; ++i) (void)limiter.when("a");
  EXPECT_EQ(limiter.when("a"), seconds(1));
  EXPECT_EQ(limiter.retries("a"), 24);
  limiter.forget("a");
  EXPECT_EQ(limiter.when("a"), milliseconds(5));
}

TEST(WorkQueueTest, TokenBucketLimitsOverallRate) {
  ManualClock clock;
  TokenBucketRateLimiter limiter(10.0, 2, clock);
  EXPECT_EQ(limiter.when("x"), Duration::zero());
  EXPECT_EQ(limiter.when("y"), Duration::zero());
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(limiter.when("z")), milliseconds(100));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(limiter.when("w")), milliseconds(200));
  clock.advance(seconds(1));
  EXPECT_EQ(limiter.when("v"), Duration::zero()) << "tokens refill at qps";
}

TEST(WorkQueueTest, RateLimitedAddsUseTheLongestLimiter) {
  ManualClock clock;
  WorkQueue queue(clock);
  queue.add_rate_limited("a");  // 5 ms per-item, bucket has tokens
  EXPECT_EQ(queue.len(), 0u);
  EXPECT_EQ(queue.delayed(), 1u);
  EXPECT_EQ(queue.retries("a"), 1);
  queue.forget("a");
  EXPECT_EQ(queue.retries("a"), 0);
}

TEST(WorkQueueTest, ShutDownReleasesWaitingWorkers) {
  WorkQueue queue;
  std::thread worker([&] { EXPECT_FALSE(queue.get().has_value()); });
  std::this_thread::sleep_for(milliseconds(20));
  queue.shut_down();
  worker.join();
  queue.add("ignored");
  EXPECT_EQ(queue.len(), 0u);
}

// Many producers and workers: no item is ever processed by two workers at once, and after
// the last add every item is processed at least once more.
TEST(WorkQueueTest, NoConcurrentProcessingUnderContention) {
  WorkQueue queue;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::map<std::string, int> processed_after_last_add;
  std::atomic<bool> overlap{false};
  std::atomic<bool> producing{true};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto item = queue.get()) {
        {
          std::lock_guard lock(mu);
          if (!in_flight.insert(*item).second) overlap = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        {
          std::lock_guard lock(mu);
          in_flight.erase(*item);
          if (!producing.load()) ++processed_after_last_add[*item];
        }
        queue.done(*item);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 rng(p);
      for (int i = 0; i < 3000; ++i) queue.add("k" + std::to_string(rng() % 16));
    });
  }
  for (auto& t : producers) t.join();
  {
    std::lock_guard lock(mu);
    producing = false;
  }
  for (int k = 0; k < 16; ++k) queue.add("k" + std::to_string(k));
  while (true) {
    std::this_thread::sleep_for(milliseconds(5));
    std::lock_guard lock(mu);
    if (processed_after_last_add.size() == 16 && in_flight.empty() && queue.len() == 0) break;
  }
  queue.shut_down();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap.load());
}

}  // namespace
}  // namespace sonde::kube
