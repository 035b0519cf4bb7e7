// The overhead brake's window and hysteresis on a fake clock, and the cost estimate's arithmetic.
#include "agent/gotls/probe_overhead.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "agent/discovery/proc_reader.h"
#include "agent/tests/cgroup2_root.h"
#include "common/files.h"
#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;
using Window = OverheadWindow<std::string>;

TEST(ProbeOverheadTest, CostIsHitsTimesTheMeasuredCostOfTheirKind) {
  std::array<uint64_t, SONDE_GOTLS_SITE_COUNT> hits{};
  hits[SONDE_GOTLS_SITE_ENTRY_EMULATED] = 4000;
  hits[SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP] = 10;
  hits[SONDE_GOTLS_SITE_RETURN_SINGLE_STEP] = 2000;
  hits[SONDE_GOTLS_SITE_RETURN_BPF_RET] = 100;
  const UprobeHitCosts costs{.emulated_ns = 1000, .single_step_ns = 13000};
  // (4000 + 100) × 1 µs + (10 + 2000) × 13 µs
  EXPECT_DOUBLE_EQ(probe_cpu_seconds(hits, costs), 4100e-6 + 2010 * 13e-6);
  EXPECT_STREQ(probe_site_kind(SONDE_GOTLS_SITE_ENTRY_EMULATED).kind, "emulated");
  EXPECT_STREQ(probe_site_kind(SONDE_GOTLS_SITE_RETURN_SINGLE_STEP).site, "return");
  EXPECT_STREQ(probe_site_kind(SONDE_GOTLS_SITE_RETURN_BPF_RET).kind, "bpf_ret");
}

// Drives one key: each step advances the clock by `interval` and adds `probe`/`own` seconds.
struct Driver {
  ::sonde::testing::ManualClock clock;
  Window window{clock};
  double probe = 0, own = 0;
  bool step(double add_probe, double add_own, std::optional<double> max = 1.0,
            uint64_t interval = 10 * kSecond) {
    clock.advance_ns(interval);
    probe += add_probe;
    own += add_own;
    return window.observe("c", probe, own, max);
  }
};

TEST(ProbeOverheadTest, OverBudgetOnlyAfterThreeConsecutiveIntervalsAboveIt) {
  Driver d;
  EXPECT_FALSE(d.step(0, 0));      // the first sample starts the window
  EXPECT_FALSE(d.step(0.02, 1));   // 2 % > 1 %: one
  EXPECT_FALSE(d.step(0.02, 1));   // two
  EXPECT_FALSE(d.step(0.005, 1));  // 0.5 %: the streak breaks
  EXPECT_FALSE(d.step(0.02, 1));   // one
  EXPECT_FALSE(d.step(0.02, 1));   // two
  EXPECT_DOUBLE_EQ(d.window.last_percent("c"), 2.0);
  EXPECT_FALSE(d.window.exceeded("c"));
  EXPECT_TRUE(d.step(0.02, 1));  // three: over budget, said once
  EXPECT_TRUE(d.window.exceeded("c"));
  EXPECT_FALSE(d.step(0.02, 1));  // not said again
  EXPECT_FALSE(d.step(0, 1));     // detached: no hits any more, and it stays over budget
  EXPECT_FALSE(d.step(0, 1));
  EXPECT_FALSE(d.step(0, 1));
  EXPECT_TRUE(d.window.exceeded("c")) << "no flap: nothing but a new budget or a retry clears it";
}

TEST(ProbeOverheadTest, ShortIntervalsWaitAndIdleIntervalsProveNothing) {
  Driver d;
  d.step(0, 0);
  // Sweeps closer than kMinIntervalNs do not close an interval: the burst below is one interval
  // of 10 s, not five.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(d.step(0.5, 1, 1.0, 2 * kSecond));
  EXPECT_FALSE(d.step(0.5, 1, 1.0, 2 * kSecond));  // 10 s: one interval above
  EXPECT_FALSE(d.step(0, 0));                      // no CPU at all: breaks the streak
  EXPECT_FALSE(d.step(0.5, 1));
  EXPECT_FALSE(d.step(0.5, 1));
  EXPECT_FALSE(d.window.exceeded("c"));
  EXPECT_TRUE(d.step(0.5, 1));
}

TEST(ProbeOverheadTest, ANewBudgetOrARetryStartsOverAndNoBudgetTracksNothing) {
  Driver d;
  d.step(0, 0);
  for (int i = 0; i < 3; ++i) d.step(0.02, 1);
  ASSERT_TRUE(d.window.exceeded("c"));
  // The policy now allows 5 %: the key starts over, with a fresh baseline.
  EXPECT_FALSE(d.step(0.02, 1, 5.0));
  EXPECT_FALSE(d.window.exceeded("c"));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(d.step(0.02, 1, 5.0));
  EXPECT_FALSE(d.window.exceeded("c"));
  // No budget: nothing kept.
  EXPECT_FALSE(d.step(1, 1, std::nullopt));
  EXPECT_EQ(d.window.size(), 0u);
  // A retry (forget) starts over too.
  d.step(0, 0);
  for (int i = 0; i < 3; ++i) d.step(0.02, 1);
  ASSERT_TRUE(d.window.exceeded("c"));
  d.window.forget("c");
  EXPECT_FALSE(d.window.exceeded("c"));
  EXPECT_FALSE(d.step(0.02, 1));  // a new baseline first
}

TEST(ProbeOverheadTest, ReadsTheCgroupV2PathAndItsCpuUsage) {
  EXPECT_EQ(cgroup2_path("4:memory:/x\n0::/kubepods/pod1/cri-containerd-ab.scope\n"),
            "/kubepods/pod1/cri-containerd-ab.scope");
  EXPECT_EQ(cgroup2_path("0::/\n"), "/");
  EXPECT_EQ(cgroup2_path("0::/../../other\n"), std::nullopt) << "a private cgroup namespace";
  EXPECT_EQ(cgroup2_path("1:cpu:/a\n"), std::nullopt) << "cgroup v1 only";
  EXPECT_EQ(cpu_stat_usage_usec("usage_usec 1234567\nuser_usec 1000000\n"), 1234567u);
  EXPECT_EQ(cpu_stat_usage_usec("user_usec 5\n"), std::nullopt);
  EXPECT_EQ(cpu_stat_usage_usec("usage_usec x1\n"), std::nullopt);
  // This process's own cgroup, where the test runs: it has used some CPU.
  const std::string root = sonde::testing::cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  auto self = cgroup_cpu_seconds("/proc", root, getpid());
  ASSERT_TRUE(self.ok()) << self.error().message();
  EXPECT_GT(*self, 0);
  EXPECT_FALSE(cgroup_cpu_seconds("/proc", root, 0).ok());
  // By id (what the kernel names; the cgroup directory's inode): the same cgroup, as far as
  // the CPU used between the two reads allows.
  auto path = cgroup2_path(*read_file("/proc/self/cgroup"));
  ASSERT_TRUE(path);
  struct stat st {};
  ASSERT_EQ(stat((root + (*path == "/" ? "" : *path)).c_str(), &st), 0);
  auto by_id = cgroup_cpu_seconds_by_id(root, st.st_ino);
  ASSERT_TRUE(by_id.ok()) << by_id.error().message();
  EXPECT_GE(*by_id, *self);
  EXPECT_LT(*by_id - *self, 5.0);
  EXPECT_FALSE(cgroup_cpu_seconds_by_id(root, 1ULL << 60).ok()) << "no such cgroup";
}

}  // namespace
}  // namespace sonde::agent
