// Lease leader election against the fake API server. Expiry is judged on the candidate's own
// clock, so these tests drive a ManualClock; the run() test uses short real durations.
#include "common/kube/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/kube/tests/fake_fixture.h"
#include "common/testing/manual_clock.h"

namespace sonde::kube::testing {
namespace {

using ::sonde::testing::ManualClock;

LeaderElectionConfig config_for(const std::string& identity) {
  LeaderElectionConfig config;
  config.lease_namespace = "sonde-system";
  config.lease_name = "sonde-operator";
  config.identity = identity;
  return config;
}

class LeaderElectionTest : public ::testing::Test {
 protected:
  LeaderElectionTest() : client_(fake_.client_config(), test_client_options()) {}
  Json lease() { return *client_.get(kLeases, "sonde-system", "sonde-operator"); }

  FakeApiServer fake_;
  ApiClient client_;
  ManualClock clock_;
};

TEST_F(LeaderElectionTest, DefaultsAreValid) {
  EXPECT_TRUE(validate(config_for("a")).ok());
  LeaderElectionConfig bad = config_for("a");
  bad.renew_deadline = bad.lease_duration;
  EXPECT_FALSE(validate(bad).ok());
}

TEST_F(LeaderElectionTest, OneHolderUntilTheLeaseExpiresOnTheObserversClock) {
  LeaderElector a(client_, config_for("a"), clock_);
  LeaderElector b(client_, config_for("b"), clock_);
  ASSERT_TRUE(a.try_acquire_or_renew());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease()["spec"]["leaseDurationSeconds"], 15);
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_EQ(b.observed_leader(), "a");

  // a renews: b sees the record change and restarts its expiry count.
  clock_.advance(std::chrono::seconds(10));
  ASSERT_TRUE(a.try_acquire_or_renew());
  EXPECT_FALSE(b.try_acquire_or_renew());
  clock_.advance(std::chrono::seconds(14));
  EXPECT_FALSE(b.try_acquire_or_renew()) << "14 s after the last renewal b saw: not expired";

  // a stops renewing (crashed); 15 s after b last saw a change, b takes over.
  clock_.advance(std::chrono::seconds(2));
  ASSERT_TRUE(b.try_acquire_or_renew());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
  EXPECT_FALSE(a.try_acquire_or_renew()) << "the old leader must not take the lease back";
}

TEST_F(LeaderElectionTest, ConcurrentCandidatesNeverBothWin) {
  for (int round = 0; round < 10; ++round) {
    const std::string name = "race-" + std::to_string(round);
    LeaderElectionConfig ca = config_for("a");
    LeaderElectionConfig cb = config_for("b");
    ca.lease_name = cb.lease_name = name;
    LeaderElector a(client_, ca, clock_);
    LeaderElector b(client_, cb, clock_);
    std::atomic<int> winners{0};
    std::thread ta([&] { winners += a.try_acquire_or_renew() ? 1 : 0; });
    std::thread tb([&] { winners += b.try_acquire_or_renew() ? 1 : 0; });
    ta.join();
    tb.join();
    EXPECT_LE(winners.load(), 1) << "round " << round;
    // Whoever did not win learns the holder on its next attempt and stays out.
    const int again = (a.try_acquire_or_renew() ? 1 : 0) + (b.try_acquire_or_renew() ? 1 : 0);
    EXPECT_EQ(again, 1) << "round " << round;
  }
}

TEST_F(LeaderElectionTest, RunLeadsRenewsAndReleasesOnStop) {
  LeaderElectionConfig config = config_for("a");
  config.lease_duration = std::chrono::seconds(2);
  config.renew_deadline = std::chrono::milliseconds(1500);
  config.retry_period = std::chrono::milliseconds(100);
  LeaderElector a(client_, config);
  StopSignal stop;
  std::atomic<int> started{0}, stopped{0};
  std::thread runner([&] {
    const bool lost = a.run(stop, {[&] { ++started; }, [&] { ++stopped; }, {}});
    EXPECT_FALSE(lost);
  });
  ASSERT_TRUE(eventually([&] { return a.is_leader(); }));
  const std::string first_renew = lease()["spec"]["renewTime"];
  ASSERT_TRUE(eventually([&] { return lease()["spec"]["renewTime"] != first_renew; }));
  stop.stop();
  runner.join();
  EXPECT_EQ(started.load(), 1);
  EXPECT_EQ(stopped.load(), 1);
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "") << "a clean stop releases the lease";

  LeaderElectionConfig next = config_for("b");
  LeaderElector b(client_, next, clock_);
  EXPECT_TRUE(b.try_acquire_or_renew()) << "a released lease is free at once";
}

TEST_F(LeaderElectionTest, LeaderStepsDownWhenItCannotRenew) {
  LeaderElectionConfig config = config_for("a");
  config.lease_duration = std::chrono::seconds(2);
  config.renew_deadline = std::chrono::milliseconds(600);
  config.retry_period = std::chrono::milliseconds(100);
  LeaderElector a(client_, config);
  StopSignal stop;
  std::atomic<bool> lost{false};
  std::thread runner([&] { lost = a.run(stop, {}); });
  ASSERT_TRUE(eventually([&] { return a.is_leader(); }));
  fake_.control("faults", {{"path", "/leases/"}, {"status", 500}, {"times", 100000}});
  const auto since = std::chrono::steady_clock::now();
  runner.join();
  EXPECT_TRUE(lost.load());
  EXPECT_FALSE(a.is_leader());
  EXPECT_LT(std::chrono::steady_clock::now() - since, std::chrono::seconds(2))
      << "must step down before the lease can expire for others";
}

// The server stops answering mid-renewal (the Lease PUT is read and never answered): the leader
// must give up at its renew deadline, so nothing it does lands after its lease expired.
TEST_F(LeaderElectionTest, NoWriteAfterTheLeaseExpiresWhenTheServerStopsAnswering) {
  LeaderElectionConfig config = config_for("a");
  config.lease_duration = std::chrono::seconds(3);
  config.renew_deadline = std::chrono::milliseconds(1500);
  config.retry_period = std::chrono::milliseconds(200);
  LeaderElector a(client_, config);
  ApiClient worker_client(fake_.client_config(), test_client_options());
  std::atomic<bool> acting{false};
  std::atomic<int> writes{0};
  StopSignal stop;
  std::thread worker([&] {
    // What a leader does while it leads: write, as the operator writes status.
    while (!stop.stopped()) {
      if (acting.load()) {
        const std::string name = "w" + std::to_string(writes++);
        EXPECT_TRUE(worker_client.create(kWidgets, "a", widget("a", name, 1)).ok());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::atomic<bool> lost{false};
  std::thread runner([&] {
    lost = a.run(stop, {[&] { acting = true; }, [&] { acting = false; }, {}});
  });
  ASSERT_TRUE(eventually([&] { return writes.load() >= 3; }));
  fake_.control("faults", {{"method", "PUT"}, {"path", "/leases/"}, {"hang", 60}, {"times", 1000}});
  runner.join();
  stop.stop();
  worker.join();
  fake_.control("faults", {{"clear", true}});
  EXPECT_TRUE(lost.load());

  double last_renewal = 0;
  std::vector<double> write_times;
  for (const auto& r : fake_.requests()) {
    const std::string path = r["path"];
    // The acquiring create or a renewing update that the server answered.
    if ((r["method"] == "PUT" || r["method"] == "POST") &&
        path.find("/leases") != std::string::npos && (r["status"] == 200 || r["status"] == 201)) {
      last_renewal = r["time"];
    }
    if (r["method"] == "POST" && path.find("/widgets") != std::string::npos) {
      write_times.push_back(r["time"]);
    }
  }
  ASSERT_GT(last_renewal, 0);
  ASSERT_GE(write_times.size(), 3u);
  const double expiry = last_renewal + 3.0;
  for (double t : write_times) {
    EXPECT_LT(t, expiry) << "a write " << t - last_renewal << " s after the last renewal";
  }
}

TEST_F(LeaderElectionTest, ALeaderStuckPastItsRenewDeadlineIsUnhealthyAFollowerIsNot) {
  LeaderElector a(client_, config_for("a"), clock_);
  StopSignal stop;
  std::atomic<bool> release{false};
  // A callback that never returns stands for an elector thread that is stuck.
  std::thread runner([&] {
    a.run(stop, {[&] {
                   while (!release.load())
                     std::this_thread::sleep_for(std::chrono::milliseconds(5));
                 },
                 {},
                 {}});
  });
  ASSERT_TRUE(eventually([&] { return a.is_leader(); }));
  EXPECT_TRUE(a.healthy());
  clock_.advance(config_for("a").renew_deadline + std::chrono::seconds(1));
  EXPECT_FALSE(a.healthy()) << "leading without a renewal for longer than the renew deadline";

  LeaderElector b(client_, config_for("b"), clock_);
  EXPECT_FALSE(b.try_acquire_or_renew());
  EXPECT_TRUE(b.healthy()) << "a follower is healthy";

  release = true;
  runner.join();  // past its deadline, the elector steps down at once
  EXPECT_FALSE(a.is_leader());
  EXPECT_TRUE(a.healthy());
  stop.stop();
}

}  // namespace
}  // namespace sonde::kube::testing
