// EventLoopMonitor against a fake kernel and a fake clock, with real processes of a real PIE
// (fake_node.c): the default loop's runtime address, the floor, the fold at exit, the grace
// period, pid reuse and exec.
#include "agent/nodejs/event_loop_monitor.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "agent/tests/child_process.h"
#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

using sonde::testing::ChildProcess;
using ::sonde::testing::ManualClock;

// The kernel's accounting as a table the test writes.
class FakeLoops final : public LoopAccounting {
 public:
  Status track(pid_t pid, const Start& start) override {
    starts[pid] = start;
    blocked[pid] = 0;
    ++tracks;
    return ok_status();
  }
  bool starting_up(pid_t pid) const override { return starting.count(pid) > 0; }
  Result<LoopReading> read_at(pid_t pid, uint64_t) const override {
    auto it = blocked.find(pid);
    if (it == blocked.end()) return Error("no state", ENOENT);
    return LoopReading{.blocked_ns = it->second};
  }
  Result<LoopReading> untrack(pid_t pid, uint64_t) override {
    auto it = blocked.find(pid);
    if (it == blocked.end()) return Error("no state", ENOENT);
    LoopReading v{.blocked_ns = it->second};
    blocked.erase(it);
    return v;
  }
  std::set<pid_t> starting;  // processes the kernel saw exec and not yet wait
  std::map<pid_t, Start> starts;
  std::map<pid_t, uint64_t> blocked;
  int tracks = 0;
};

constexpr uint64_t kGrace = 60'000'000'000;
const ContainerLabels kWeb{"shop", "web-1", "app"};

class EventLoopMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    child_ = std::make_unique<ChildProcess>(std::vector<std::string>{SONDE_FAKE_NODE});
    ASSERT_GT(child_->pid(), 0);
    ASSERT_TRUE(child_->wait_for_line("loop ", std::chrono::seconds(10)));
    ASSERT_EQ(
        std::sscanf(child_->last_line().c_str(), "loop %" SCNx64 " %d", &loop_address_, &epfd_), 2);
    // Until its main thread waits in epoll_wait (what a running Node.js is found doing).
    for (int i = 0; i < 500; ++i) {
      auto s = proc_.syscall_of(child_->pid(), child_->pid());
      if (s.ok() && s->nr != -1 && static_cast<int>(s->arg0) == epfd_) break;
      usleep(10'000);
    }
  }

  Candidate candidate(bool running) {
    auto info = proc_.read(child_->pid());
    EXPECT_TRUE(info.ok());
    auto c = open_candidate(proc_, *info, running);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
    return std::move(c).value();
  }

  double blocked_seconds(const ContainerLabels& labels) {
    for (const auto& s : monitor_.samples()) {
      if (s.labels == labels) return s.blocked_seconds;
    }
    return -1;  // no series
  }

  int event_loops(const ContainerLabels& labels) {
    for (const auto& s : monitor_.samples()) {
      if (s.labels == labels) return static_cast<int>(s.loops);
    }
    return -1;  // no series
  }

  ProcReader proc_;
  symbols::ProbeTargetCache cache_{64};
  ::sonde::testing::ManualClock clock_;
  FakeLoops loops_;
  EventLoopMonitor monitor_{loops_, cache_, proc_, kGrace, clock_};
  std::unique_ptr<ChildProcess> child_;
  uint64_t loop_address_ = 0;
  int epfd_ = -1;
};

TEST_F(EventLoopMonitorTest, FindsTheDefaultLoopOfAPieFromItsLoadBias) {
  ASSERT_EQ(monitor_.consider(candidate(true), kWeb), EventLoopMonitor::Outcome::kTracked);
  const auto& start = loops_.starts.at(child_->pid());
  EXPECT_EQ(start.default_loop, loop_address_);  // where the process says its loop is
  EXPECT_FALSE(start.any_epfd);
  // Found mid-wait on the loop's own fd, read through the computed address.
  EXPECT_EQ(start.now, LoopAccounting::Start::Now::kWaiting);
  EXPECT_EQ(start.epfd, epfd_);
  ASSERT_EQ(monitor_.binaries().size(), 1u);
  EXPECT_EQ(monitor_.binaries()[0].mode, LoopMode::kPrecise);
}

TEST_F(EventLoopMonitorTest, AProcessJustExecdIsAccountedFromItsFirstWait) {
  ASSERT_EQ(monitor_.consider(candidate(false), kWeb), EventLoopMonitor::Outcome::kTracked);
  EXPECT_EQ(loops_.starts.at(child_->pid()).now, LoopAccounting::Start::Now::kUnknown);
}

TEST_F(EventLoopMonitorTest, ACounterNeverGoesBackwardsWhenTheKernelStateIsLost) {
  const pid_t pid = child_->pid();
  ASSERT_EQ(monitor_.consider(candidate(true), kWeb), EventLoopMonitor::Outcome::kTracked);
  loops_.blocked[pid] = 5'000'000'000;
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 5.0);
  EXPECT_EQ(event_loops(kWeb), 1);
  loops_.blocked.erase(pid);  // evicted from the LRU map
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 5.0);
  EXPECT_EQ(monitor_.states_lost(), 1u);
  EXPECT_EQ(event_loops(kWeb), 0);  // still a process, no longer a measured loop
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 5.0);
  EXPECT_EQ(monitor_.states_lost(), 1u);  // counted once
  monitor_.exited(pid, clock_.now_ns());  // untrack fails: the last value read is what folds
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 5.0);
}

TEST_F(EventLoopMonitorTest, FoldsAtExitAndForgetsTheContainerAfterTheGrace) {
  const pid_t pid = child_->pid();
  ASSERT_EQ(monitor_.consider(candidate(true), kWeb), EventLoopMonitor::Outcome::kTracked);
  loops_.blocked[pid] = 2'000'000'000;
  EXPECT_EQ(event_loops(kWeb), 1);
  monitor_.exited(pid, clock_.now_ns());
  EXPECT_EQ(monitor_.tracked(), 0u);
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 2.0);
  EXPECT_EQ(event_loops(kWeb), 0);  // the series stays through the grace, at 0 loops
  clock_.advance_ns(kGrace - 1);
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 2.0);
  clock_.advance_ns(1);
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), -1);  // gone from /metrics
  EXPECT_TRUE(monitor_.binaries().empty());
}

TEST_F(EventLoopMonitorTest, PidReuseAndExecOnlyAdd) {
  const pid_t pid = child_->pid();
  Candidate c = candidate(true);
  ASSERT_EQ(monitor_.consider(c, kWeb), EventLoopMonitor::Outcome::kTracked);
  loops_.blocked[pid] = 3'000'000'000;
  // The same process again (a re-selection): nothing changes.
  ASSERT_EQ(monitor_.consider(c, kWeb), EventLoopMonitor::Outcome::kTracked);
  EXPECT_EQ(loops_.tracks, 1);
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 3.0);
  // The pid now names another process (its exit event was lost): the old one folds, the new
  // one starts from 0.
  Candidate reused = candidate(true);
  reused.info.start_time += 1;
  ASSERT_EQ(monitor_.consider(reused, kWeb), EventLoopMonitor::Outcome::kTracked);
  EXPECT_EQ(loops_.tracks, 2);
  loops_.blocked[pid] = 1'000'000'000;
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 4.0);
  // It execs: a new program in the same pid, counted on top.
  ASSERT_EQ(monitor_.consider(candidate(false), kWeb), EventLoopMonitor::Outcome::kTracked);
  EXPECT_EQ(loops_.tracks, 3);
  loops_.blocked[pid] = 500'000'000;
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 4.5);
  EXPECT_EQ(monitor_.tracked(), 1u);
}

TEST_F(EventLoopMonitorTest, SweepFinishesAProcessThatVanishedWithoutAnExitEvent) {
  const pid_t pid = child_->pid();
  ASSERT_EQ(monitor_.consider(candidate(true), kWeb), EventLoopMonitor::Outcome::kTracked);
  loops_.blocked[pid] = 7'000'000'000;
  monitor_.sweep();
  EXPECT_EQ(monitor_.tracked(), 1u);  // still there
  child_.reset();                     // killed and reaped; no exit event reaches the monitor
  monitor_.sweep();
  EXPECT_EQ(monitor_.tracked(), 0u);
  EXPECT_DOUBLE_EQ(blocked_seconds(kWeb), 7.0);
}

TEST_F(EventLoopMonitorTest, ABinaryWithoutNodeSymbolsIsNotNode) {
  ChildProcess sleeper({"/bin/sleep", "30"});
  auto info = proc_.read(sleeper.pid());
  ASSERT_TRUE(info.ok());
  auto c = open_candidate(proc_, *info, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(monitor_.consider(*c, kWeb), EventLoopMonitor::Outcome::kNotNode);
  EXPECT_EQ(loops_.tracks, 0);
}

}  // namespace
}  // namespace sonde::agent
