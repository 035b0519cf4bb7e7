// The stall recorder on the real kernel with real /usr/bin/node (no flag): a loop stuck for good
// is reported once, ongoing, when it passes the cap, with the stuck function on top; a long turn
// spent off the CPU is reported with its exact duration and (almost) no samples. The common
// case (200 ms blocks, short turns not reported) is e2e/nodejs_stalls_test.sh. Needs root
// (ctest label: bpf).
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/stall_recorder.h"
#include "agent/tests/child_process.h"

namespace sonde::agent {
namespace {

using sonde::testing::ChildProcess;
using std::chrono::milliseconds;

class StallRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto probes = LoopProbes::load();
    ASSERT_TRUE(probes.ok()) << probes.error().message();
    probes_ = std::move(probes).value();
  }
  void start(uint64_t ongoing_after_ns) {
    StallRecorderOptions o;
    o.loops_map_fd = probes_->loops_map_fd();
    o.thresholds_map_fd = probes_->stall_thresholds_fd();
    o.events_map = probes_->stall_events_map();
    o.events_lost = [this] { return probes_->stall_events_lost(); };
    o.on_stall = [this](const Stall&) { ++posted_; };
    o.ongoing_after_ns = ongoing_after_ns;
    recorder_ = std::make_unique<StallRecorder>(std::move(o));
  }
  void watch(pid_t pid) {
    // As the agent does: where the wait hook is per process (libc uprobes, the default without
    // BPF trampolines), the process's C library is hooked first.
    if (probes_->source() == LoopProbes::WaitSource::kLibcUprobes) {
      hooks_ = std::make_unique<LibcWaitHooks>(*probes_, cache_);
      auto hooked = hooks_->hook(pid, 0);
      ASSERT_TRUE(hooked.ok()) << hooked.error().message();
    }
    LoopProbes::Start track;
    track.any_epfd = true;  // every main-thread epoll wait is the loop's: no symbols needed
    ASSERT_TRUE(probes_->track(pid, track).ok());
    ASSERT_TRUE(recorder_->watch(pid, {"test", "pod", "app"}, 100'000'000).ok());
  }
  nlohmann::json stalls_of(pid_t pid) {
    auto all = nlohmann::json::parse(recorder_->ring().to_json());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : all["stalls"]) {
      if (s["pid"] == pid) out.push_back(s);
    }
    return out;
  }
  bool wait_for_stalls(pid_t pid, size_t n, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (stalls_of(pid).size() >= n) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  std::unique_ptr<LoopProbes> probes_;
  symbols::ProbeTargetCache cache_;
  std::unique_ptr<LibcWaitHooks> hooks_;  // after the probes it attaches
  std::atomic<int> posted_{0};
  std::unique_ptr<StallRecorder> recorder_;  // before the probes whose maps it uses
};

TEST_F(StallRecorderTest, ALoopStuckForGoodIsReportedOnceOngoing) {
  start(800'000'000);
  ChildProcess child({"/usr/bin/node", SONDE_NODEJS_TEST_DIR "/stall_modes.js", "stuck"});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  watch(child.pid());
  ASSERT_TRUE(recorder_->sampling());
  ASSERT_TRUE(wait_for_stalls(child.pid(), 1, milliseconds(10000))) << recorder_->ring().to_json();
  // Ten more rounds: the same turn is not reported again.
  std::this_thread::sleep_for(milliseconds(1000));
  const auto stalls = stalls_of(child.pid());
  ASSERT_EQ(stalls.size(), 1u) << stalls.dump();
  const auto& s = stalls[0];
  std::printf("ongoing: %.1f ms, %d samples, top: %s\n", s["durationMs"].get<double>(),
              s["samples"].get<int>(), s["stacks"][0]["frames"].dump().substr(0, 200).c_str());
  EXPECT_TRUE(s["ongoing"].get<bool>());
  EXPECT_GE(s["durationMs"].get<double>(), 800.0);
  EXPECT_LT(s["durationMs"].get<double>(), 2000.0);
  EXPECT_GE(s["samples"].get<int>(), 10);
  ASSERT_FALSE(s["stacks"].empty());
  bool named = false;
  for (const auto& f : s["stacks"][0]["frames"]) {
    named = named || f.get<std::string>().find("sondeStuckForever") != std::string::npos;
  }
  EXPECT_TRUE(named) << s["stacks"][0].dump();
  EXPECT_EQ(posted_.load(), 1);

  // The last watched process forgotten, the sampler's perf events are closed; a new watch
  // opens them again.
  recorder_->forget(child.pid());
  EXPECT_FALSE(recorder_->sampling());
  watch(child.pid());
  EXPECT_TRUE(recorder_->sampling());
}

TEST_F(StallRecorderTest, ATurnOffTheCpuIsReportedWithItsDuration) {
  start(StallRing::kOngoingAfterNs);
  ChildProcess child({"/usr/bin/node", SONDE_NODEJS_TEST_DIR "/stall_modes.js", "sleep"});
  ASSERT_TRUE(child.wait_for_line("ready", milliseconds(10000)));
  watch(child.pid());
  ASSERT_TRUE(child.wait_for_line("done", milliseconds(10000)));
  ASSERT_TRUE(wait_for_stalls(child.pid(), 1, milliseconds(3000))) << recorder_->ring().to_json();
  const auto stalls = stalls_of(child.pid());
  ASSERT_EQ(stalls.size(), 1u) << stalls.dump();
  const auto& s = stalls[0];
  std::printf("off-CPU: %.1f ms, %d samples\n", s["durationMs"].get<double>(),
              s["samples"].get<int>());
  EXPECT_FALSE(s["ongoing"].get<bool>());
  EXPECT_GE(s["durationMs"].get<double>(), 300.0);
  EXPECT_LE(s["durationMs"].get<double>(), 330.0);
  EXPECT_LE(s["samples"].get<int>(), 3);  // asleep: the sampler sees it at most in passing
  EXPECT_EQ(child.wait(), 0);
}

}  // namespace
}  // namespace sonde::agent
