#include "agent/runtime/process_tracker.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace sonde::agent {
namespace {

const ContainerLabels kShop{"shop", "checkout-1", "app"};
const ContainerLabels kOther{"shop", "checkout-2", "app"};
constexpr uint64_t kGrace = 300;

struct Floor {
  uint64_t last = 0;  // the highest value read, as a monitor keeps it
};
using Tracker = ProcessTracker<uint64_t, Floor, std::string>;

// The value of each container's total, by labels.
std::map<ContainerLabels, uint64_t> values(const std::vector<Tracker::Total>& totals) {
  std::map<ContainerLabels, uint64_t> out;
  for (const auto& t : totals) out[t.labels] = t.value;
  return out;
}

// Reads the live counts from `kernel` (pid → counter), as a monitor reads its kernel map.
auto reader(const std::map<pid_t, uint64_t>& kernel) {
  return [&kernel](pid_t pid, const Tracker::Process&) {
    auto it = kernel.find(pid);
    return it == kernel.end() ? uint64_t{0} : it->second;
  };
}

TEST(ProcessTracker, ReportsLiveAndFinishedProcessesPerContainer) {
  Tracker t(kGrace);
  t.start(10, {1000, kShop, "node-a"});
  t.start(11, {1001, kShop, "node-a"});
  t.start(12, {1002, kOther, "node-a"});
  std::map<pid_t, uint64_t> kernel{{10, 5}, {11, 7}, {12, 100}};
  auto r = t.report(1, reader(kernel));
  EXPECT_EQ(values(r), (std::map<ContainerLabels, uint64_t>{{kShop, 12}, {kOther, 100}}));
  for (const auto& total : r) EXPECT_EQ(total.processes, total.labels == kShop ? 2u : 1u);

  // pid 10 exits with 9: its final counts stay in its container, its live ones are gone.
  auto ended = t.finish(10, 2, [](const Tracker::Process& p) {
    EXPECT_EQ(p.start_time, 1000u);
    return uint64_t{9};
  });
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->labels, kShop);
  kernel.erase(10);
  kernel[11] = 8;
  r = t.report(3, reader(kernel));
  EXPECT_EQ(values(r), (std::map<ContainerLabels, uint64_t>{{kShop, 17}, {kOther, 100}}));
  EXPECT_EQ(t.size(), 2u);
}

// An exec (or a reused pid) is a new process: the old one is finished, the new one starts from its
// own counts, and the container only adds.
TEST(ProcessTracker, ANewProcessUnderAPidOnlyAdds) {
  Tracker t(kGrace);
  t.start(10, {1000, kShop, "node-a"});
  t.finish(10, 5, [](const Tracker::Process&) { return uint64_t{40}; });
  t.start(10, {2000, kShop, "node-b"});
  ASSERT_NE(t.find(10), nullptr);
  EXPECT_EQ(t.find(10)->start_time, 2000u);
  std::map<pid_t, uint64_t> kernel{{10, 2}};
  EXPECT_EQ(values(t.report(6, reader(kernel)))[kShop], 42u);
}

TEST(ProcessTracker, FinishingAnUntrackedPidDoesNothing) {
  Tracker t(kGrace);
  t.start(10, {1000, kShop, "node-a"});
  bool read = false;
  auto ended = t.finish(11, 5, [&](const Tracker::Process&) {
    read = true;
    return uint64_t{1};
  });
  EXPECT_FALSE(ended.has_value());
  EXPECT_FALSE(read);  // a monitor's final read (it drains kernel state) is not made
  EXPECT_EQ(t.size(), 1u);
  // A second finish of one process is a no-op too: the container keeps its value.
  t.finish(10, 6, [](const Tracker::Process&) { return uint64_t{3}; });
  t.finish(10, 7, [](const Tracker::Process&) { return uint64_t{100}; });
  EXPECT_EQ(values(t.report(8, reader({})))[kShop], 3u);
}

// Starting a pid that is still tracked replaces it without losing the container's live-process
// count: the container is forgotten a grace period after the replacement ends, not never.
TEST(ProcessTracker, StartingATrackedPidReplacesIt) {
  Tracker t(kGrace);
  t.start(10, {1000, kShop, "node-a"});
  t.start(10, {2000, kShop, "node-a"});
  auto r = t.report(1, reader({}));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].processes, 1u);
  ASSERT_EQ(t.binaries().size(), 1u);
  EXPECT_EQ(t.binaries().at("node-a").processes, 1u);
  t.finish(10, 10, [](const Tracker::Process&) { return uint64_t{1}; });
  EXPECT_EQ(t.report(10 + kGrace, reader({})).size(), 0u);
}

TEST(ProcessTracker, CountsProcessesPerBinaryAndForgetsABinaryWithItsLastProcess) {
  Tracker t(kGrace);
  EXPECT_TRUE(t.start(10, {1000, kShop, "node-a"}, "first"));
  EXPECT_FALSE(t.start(11, {1001, kOther, "node-a"}, "second"));  // known: its data is kept
  EXPECT_TRUE(t.start(12, {1002, kShop, "node-b"}, "b"));
  ASSERT_NE(t.binary("node-a"), nullptr);
  EXPECT_EQ(*t.binary("node-a"), "first");
  EXPECT_EQ(t.binaries().at("node-a").processes, 2u);
  EXPECT_EQ(t.binaries().at("node-b").processes, 1u);

  auto zero = [](const Tracker::Process&) { return uint64_t{0}; };
  t.finish(10, 1, zero);
  EXPECT_EQ(t.binaries().at("node-a").processes, 1u);
  t.finish(11, 2, zero);
  EXPECT_EQ(t.binary("node-a"), nullptr);
  EXPECT_EQ(t.binaries().size(), 1u);
  // Seen again after its last process: new to the tracker, with the data given now.
  EXPECT_TRUE(t.start(13, {1003, kShop, "node-a"}, "again"));
  EXPECT_EQ(*t.binary("node-a"), "again");
}

// The live reader may keep state per process: a floor that a lost kernel entry never lowers, as
// the Node.js monitor keeps one.
TEST(ProcessTracker, TheLiveReaderKeepsPerProcessData) {
  Tracker t(kGrace);
  t.start(10, {1000, kShop, "node-a"});
  std::map<pid_t, uint64_t> kernel{{10, 30}};
  auto floored = [&kernel](pid_t pid, Tracker::Process& p) {
    if (auto it = kernel.find(pid); it != kernel.end())
      p.data.last = std::max(p.data.last, it->second);
    return p.data.last;
  };
  EXPECT_EQ(values(t.report(1, floored))[kShop], 30u);
  kernel.clear();  // the entry was evicted
  EXPECT_EQ(values(t.report(2, floored))[kShop], 30u);
  EXPECT_EQ(t.find(10)->data.last, 30u);
}

TEST(ProcessTracker, UntrackedProcessesFoldIntoTheirContainerAndAreForgottenAfterTheGrace) {
  Tracker t(kGrace);
  t.fold_untracked(kShop, 25, 100);
  auto r = t.report(101, reader({}));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].value, 25u);
  EXPECT_EQ(r[0].processes, 0u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.report(100 + kGrace, reader({})).size(), 0u);
}

// Against the real /proc: this process lives; a child that exited and was reaped is gone; a pid
// seen with another start time names another process now.
TEST(ProcessTracker, VanishedAreTheProcessesGoneFromProc) {
  ProcReader proc;
  auto self_start = proc.start_time(getpid());
  ASSERT_TRUE(self_start.ok()) << self_start.error().message();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  auto child_start = proc.start_time(child);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);

  Tracker t(kGrace);
  t.start(getpid(), {*self_start, kShop, "self"});
  t.start(child, {child_start.ok() ? *child_start : 1, kShop, "child"});
  t.start(getppid(), {1, kOther, "parent"});  // not the parent's start time
  auto gone = t.vanished(proc);
  std::sort(gone.begin(), gone.end());
  std::vector<pid_t> expected{child, getppid()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(gone, expected);
  EXPECT_EQ(t.size(), 3u);  // vanished() only says; the feature finishes them
}

}  // namespace
}  // namespace sonde::agent
