// Two sonde-operator processes against the fake API server: one leads and writes status;
// SIGKILL it and the other takes over within the lease duration; only the Lease holder ever
// writes status. Short lease timings keep the test fast.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "common/kube/resource.h"
#include "common/testing/free_port.h"
#include "operator/tests/operator_fixture.h"

extern char** environ;

namespace sonde::op::testing {
namespace {

constexpr auto kLeaseDuration = std::chrono::seconds(2);

class OperatorProcess {
 public:
  OperatorProcess(const std::string& identity, const std::string& kubeconfig)
      : log_(::testing::TempDir() + "operator-" + identity + ".log") {
    std::vector<std::string> args = {
        SONDE_OPERATOR_BINARY,
        "--kubeconfig=" + kubeconfig,
        "--leader-election-identity=" + identity,
        "--metrics-address=127.0.0.1:" + std::to_string(sonde::testing::free_port()),
        "--lease-duration=2s",
        "--renew-deadline=1500ms",
        "--retry-period=200ms"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~OperatorProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Sends `sig` and returns the exit status.
  int signal_and_wait(int sig) {
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  // What the process wrote to stderr: its log, and a sanitizer's report if one fired.
  std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::string identity_of(const Json& request) {
  const std::string ua = request["userAgent"];
  const auto open = ua.find('(');
  const auto close = ua.find(')');
  return open == std::string::npos ? "" : ua.substr(open + 1, close - open - 1);
}

TEST(FailoverTest, OnlyTheLeaderWritesAndTheOtherTakesOverWithinTheLease) {
  kube::testing::FakeApiServer fake;
  const std::string kubeconfig = ::testing::TempDir() + "failover-kubeconfig";
  fake.write_kubeconfig(kubeconfig);
  kube::ApiClient client(fake.client_config(), {.qps = 0});  // polls; not under test
  auto holder = [&]() -> std::string {
    auto lease = client.get(kube::kLeases, "sonde-system", "sonde-operator");
    return lease.ok() ? (*lease)["spec"].value("holderIdentity", "") : "";
  };
  // The policy's status field, {} until the operator writes one.
  auto status = [&]() {
    auto p = client.get(kProfilingPolicies, "team-a", "web");
    return p.ok() ? p->value("status", Json::object()) : Json::object();
  };
  auto policy = client.create(kProfilingPolicies, "team-a", make_policy("team-a", "web"));
  ASSERT_TRUE(policy.ok());
  put_object(client, kube::kLeases, make_node_lease("n1", std::chrono::system_clock::now()));
  put_object(client, kProfilingNodeReports,
             make_report("n1", {report_entry(kube::uid_of(*policy), 1, 1, 1)}));

  auto a = std::make_unique<OperatorProcess>("op-a", kubeconfig);
  ASSERT_TRUE(eventually([&] { return holder() == "op-a"; })) << "op-a never took the lease";
  OperatorProcess b("op-b", kubeconfig);
  ASSERT_TRUE(eventually([&] { return status().value("nodesReporting", 0) == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // b is campaigning meanwhile
  EXPECT_EQ(holder(), "op-a");

  // Kill the leader without letting it release the lease.
  const auto killed_at = std::chrono::steady_clock::now();
  a->signal_and_wait(SIGKILL);
  const double killed_wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  ASSERT_TRUE(eventually([&] { return holder() == "op-b"; }, std::chrono::seconds(10)));
  const auto takeover = std::chrono::steady_clock::now() - killed_at;
  std::printf("takeover after SIGKILL: %.0f ms (lease %lld s)\n",
              std::chrono::duration<double, std::milli>(takeover).count(),
              static_cast<long long>(kLeaseDuration.count()));
  // Expiry is judged from b's last observation of a renewal (at most one retry period before
  // the kill), so takeover lands within the lease duration plus one jittered retry period.
  EXPECT_LE(takeover, kLeaseDuration + std::chrono::milliseconds(500));

  // The new leader reconciles a change.
  ASSERT_TRUE(client
                  .merge_patch(kProfilingPolicies, "team-a", "web",
                               {{"spec", {{"instrumentations", {{"cpu", {{"frequencyHz", 19}}}}}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] { return status().value("observedGeneration", 0) == 2; }));

  const auto writes = status_writes(fake);
  ASSERT_GE(writes.size(), 2u);
  for (const auto& w : writes) {
    const double at = w["time"];
    EXPECT_EQ(identity_of(w), at < killed_wall ? "op-a" : "op-b")
        << "status written by a replica that did not hold the lease";
  }

  // A graceful stop releases the lease at once.
  const int exit_status = b.signal_and_wait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
      << "wait status " << exit_status << "; op-b's stderr:\n"
      << b.log();
  EXPECT_EQ(holder(), "");
}

}  // namespace
}  // namespace sonde::op::testing
