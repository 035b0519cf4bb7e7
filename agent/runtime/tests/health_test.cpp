#include "agent/runtime/health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

using std::chrono::seconds;
using Probe = HealthRegistry::Probe;

constexpr uint64_t kSecond = 1'000'000'000;

class HealthRegistryTest : public ::testing::Test {
 protected:
  ::sonde::testing::ManualClock clock;
  HealthRegistry health{clock};
};

TEST_F(HealthRegistryTest, NoChecksIsHealthy) {
  EXPECT_TRUE(health.check(Probe::kLiveness).ok);
  EXPECT_TRUE(health.check(Probe::kReadiness).ok);
}

// A loop that beats within its bound stays alive; one that stops fails liveness (and so
// readiness) with its name and how long it has been silent, and recovers with its next beat.
TEST_F(HealthRegistryTest, AHeartbeatGoesStaleAfterItsBoundAndRecovers) {
  auto loop = health.add("event-loop", Probe::kLiveness, seconds(30));
  health.add("other", Probe::kLiveness, seconds(30));
  clock.advance_ns(29 * kSecond);
  health.beat(loop);
  clock.advance_ns(30 * kSecond);  // "other" beat never: its bound runs from registration
  auto live = health.check(Probe::kLiveness);
  EXPECT_FALSE(live.ok);
  EXPECT_NE(live.body.find("[+]event-loop ok"), std::string::npos) << live.body;
  EXPECT_NE(live.body.find("[-]other: no heartbeat for 59.0 s (limit 30.0 s)"), std::string::npos)
      << live.body;
  EXPECT_FALSE(health.check(Probe::kReadiness).ok) << "not alive is not ready";

  clock.advance_ns(2 * kSecond);  // the event loop's last beat is now 32 s old
  live = health.check(Probe::kLiveness);
  EXPECT_NE(live.body.find("[-]event-loop: no heartbeat for 32.0 s"), std::string::npos)
      << live.body;
  health.beat(loop);
  EXPECT_NE(health.check(Probe::kLiveness).body.find("[+]event-loop ok"), std::string::npos);
}

// Exactly at the bound is still alive: stale means older than the bound.
TEST_F(HealthRegistryTest, ABeatExactlyAtTheBoundIsAlive) {
  auto loop = health.add("loop", Probe::kLiveness, seconds(10));
  health.beat(loop);
  clock.advance_ns(10 * kSecond);
  EXPECT_TRUE(health.check(Probe::kLiveness).ok);
  clock.advance_ns(1);
  EXPECT_FALSE(health.check(Probe::kLiveness).ok);
}

// A readiness check failing leaves liveness alone: the kubelet must not restart an agent whose
// node Lease the API server does not take.
TEST_F(HealthRegistryTest, ReadinessChecksDoNotFailLiveness) {
  auto lease = health.add("node-lease", Probe::kReadiness, seconds(40), "Lease not renewed");
  clock.advance_ns(41 * kSecond);
  EXPECT_TRUE(health.check(Probe::kLiveness).ok);
  EXPECT_EQ(health.check(Probe::kLiveness).body.find("node-lease"), std::string::npos);
  auto ready = health.check(Probe::kReadiness);
  EXPECT_FALSE(ready.ok);
  EXPECT_NE(ready.body.find("[-]node-lease: Lease not renewed for 41.0 s (limit 40.0 s)"),
            std::string::npos)
      << ready.body;
  health.beat(lease);
  EXPECT_TRUE(health.check(Probe::kReadiness).ok);
}

// A problem fails its check until cleared and says since when; setting it again does not move
// that time, a different problem is still the same failure.
TEST_F(HealthRegistryTest, AProblemFailsUntilClearedAndKeepsItsStart) {
  auto inspection = health.add("inspection", Probe::kLiveness);
  clock.advance_ns(100 * kSecond);
  EXPECT_TRUE(health.check(Probe::kLiveness).ok) << "no heartbeat expected";
  health.set_problem(inspection, "every worker hung");
  clock.advance_ns(5 * kSecond);
  health.set_problem(inspection, "every worker hung");
  clock.advance_ns(5 * kSecond);
  auto live = health.check(Probe::kLiveness);
  EXPECT_FALSE(live.ok);
  EXPECT_NE(live.body.find("[-]inspection: every worker hung (for 10.0 s)"), std::string::npos)
      << live.body;
  health.set_problem(inspection, "every worker hung: a, b");
  EXPECT_NE(health.check(Probe::kLiveness).body.find("a, b (for 10.0 s)"), std::string::npos);
  health.clear_problem(inspection);
  EXPECT_TRUE(health.check(Probe::kLiveness).ok);
}

// A gate fails readiness until its condition holds once; it is not asked again after.
TEST_F(HealthRegistryTest, AGateFailsUntilItPassesOnce) {
  std::atomic<bool> synced{false};
  int asked = 0;
  health.add_gate(
      "informers", Probe::kReadiness,
      [&] {
        ++asked;
        return synced.load();
      },
      "policies and pods not listed yet");
  clock.advance_ns(3 * kSecond);
  auto ready = health.check(Probe::kReadiness);
  EXPECT_FALSE(ready.ok);
  EXPECT_NE(ready.body.find("[-]informers: policies and pods not listed yet (for 3.0 s)"),
            std::string::npos)
      << ready.body;
  EXPECT_TRUE(health.check(Probe::kLiveness).ok);
  EXPECT_EQ(asked, 1) << "a liveness probe does not ask readiness gates";
  synced = true;
  EXPECT_TRUE(health.check(Probe::kReadiness).ok);
  synced = false;
  EXPECT_TRUE(health.check(Probe::kReadiness).ok) << "a passed gate stays passed";
  EXPECT_EQ(asked, 2);
}

// A wait that began before its gate could be registered (the informers start before the runtime
// that holds the registry) is told from its own start.
TEST_F(HealthRegistryTest, AGateCountsFromWhenTheWaitBegan) {
  const uint64_t began = clock.now_ns();
  clock.advance_ns(30 * kSecond);
  health.add_gate(
      "informers", Probe::kReadiness, [] { return false; }, "not listed yet", began);
  clock.advance_ns(2 * kSecond);
  EXPECT_NE(health.check(Probe::kReadiness).body.find("[-]informers: not listed yet (for 32.0 s)"),
            std::string::npos)
      << health.check(Probe::kReadiness).body;
}

TEST_F(HealthRegistryTest, AnswersListEveryCheckOfTheProbe) {
  health.add("a", Probe::kLiveness, seconds(1));
  health.add("b", Probe::kReadiness);
  EXPECT_EQ(health.check(Probe::kLiveness).body, "[+]a ok\nok\n");
  EXPECT_EQ(health.check(Probe::kReadiness).body, "[+]a ok\n[+]b ok\nok\n");
}

}  // namespace
}  // namespace sonde::agent
