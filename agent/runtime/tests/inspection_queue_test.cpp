#include "agent/runtime/inspection_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace sonde::agent {
namespace {

using std::chrono::milliseconds;

TEST(InspectionQueue, RunsJobsInOrderOffTheCallersThread) {
  InspectionQueue q({});
  std::mutex mu;
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id(), worker;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(q.push("file" + std::to_string(i % 3), [&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      worker = std::this_thread::get_id();
    }));
  }
  ASSERT_TRUE(q.drain(std::chrono::seconds(10)));
  std::lock_guard lock(mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(worker, caller);
}

// A job that hangs (a read of a file whose server stopped answering) costs its worker, not the
// queue: past the deadline the next jobs run on a new worker, and the file is refused after.
TEST(InspectionQueue, AbandonsAWorkerStuckPastTheDeadline) {
  InspectionQueue q({.deadline = milliseconds(100)});
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_TRUE(q.push("fuse:42", [released] { released.wait(); }));
  ASSERT_TRUE(q.push("disk:1", [&] { ran++; }));
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(ran.load(), 0) << "a job ran while the worker was stuck before it";
  auto stuck = q.check();
  ASSERT_EQ(stuck, std::vector<std::string>{"fuse:42"});
  ASSERT_TRUE(q.drain(std::chrono::seconds(10)));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_FALSE(q.push("fuse:42", [&] { ran++; })) << "the file that hung was tried again";
  EXPECT_TRUE(q.push("disk:2", [&] { ran++; }));
  ASSERT_TRUE(q.drain(std::chrono::seconds(10)));
  EXPECT_EQ(ran.load(), 2);
  auto st = q.stats();
  EXPECT_EQ(st.stuck_workers, 1u);
  EXPECT_EQ(st.refused, 1u);
  EXPECT_FALSE(st.exhausted) << "a new worker carries on";
  release.set_value();  // the abandoned job finishes late, on its own thread
}

TEST(InspectionQueue, StopsInspectingAfterTooManyStuckWorkers) {
  InspectionQueue q({.deadline = milliseconds(20), .max_stuck = 2});
  std::promise<void> release;
  auto released = release.get_future().share();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(q.push("hang" + std::to_string(i), [released] { released.wait(); }));
    ASSERT_TRUE(q.push("", [] {}));
    EXPECT_FALSE(q.stats().exhausted);
    std::this_thread::sleep_for(milliseconds(60));
    EXPECT_EQ(q.check().size(), 1u);
  }
  EXPECT_TRUE(q.stats().exhausted);
  EXPECT_FALSE(q.push("", [] {})) << "jobs accepted with every worker stuck";
  EXPECT_EQ(q.stats().stuck_workers, 2u);
  EXPECT_GE(q.stats().refused, 1u);
  release.set_value();
}

TEST(InspectionQueue, RefusesJobsBeyondItsBound) {
  InspectionQueue q({.max_queued = 4});
  std::promise<void> release;
  auto released = release.get_future().share();
  ASSERT_TRUE(q.push("", [released] { released.wait(); }));
  std::this_thread::sleep_for(milliseconds(50));  // the worker holds the first job
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += q.push("", [] {}) ? 1 : 0;
  EXPECT_EQ(accepted, 4);
  EXPECT_EQ(q.stats().refused, 6u);
  release.set_value();
  EXPECT_TRUE(q.drain(std::chrono::seconds(10)));
}

}  // namespace
}  // namespace sonde::agent
