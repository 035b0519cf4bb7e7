// The Go TLS probes on the real kernel with the real Go workload (e2e/workloads/gotls): a
// process is counted in the kernel from its first call without being tracked, and the cgroup
// filter counts only processes of allowed cgroups (cgroup v2; the test makes its own cgroup).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "agent/discovery/candidate.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
#include "agent/tests/child_process.h"

namespace sonde::agent {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;

// Where the cgroup v2 hierarchy is mounted, or "" (hybrid hosts mount it at .../unified).
std::string cgroup2_root() {
  std::ifstream mounts("/proc/self/mounts");
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) {
    if (type == "cgroup2") return dir;
  }
  return "";
}

// Requests counted in the kernel for tgid, 0 when it is not counted at all.
uint64_t requests_of(const TlsProbes& probes, pid_t tgid, bool* counted) {
  auto all = probes.counts();
  auto it = all.find(static_cast<uint32_t>(tgid));
  *counted = it != all.end();
  uint64_t n = 0;
  if (*counted) {
    for (const auto& [key, stats] : it->second.requests) n += stats.count;
  }
  return n;
}

class TlsProbesBpfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF";
    if (std::string(SONDE_GOTLS_WORKLOAD).empty()) GTEST_SKIP() << "no Go toolchain";
    auto p = TlsProbes::load();
    ASSERT_TRUE(p.ok()) << p.error().message();
    probes_ = std::move(*p);
  }

  // Runs `gotls client PORT 200 200` inside cgroup dir (the cgroup v2 path), waits for it.
  pid_t run_client(const std::string& cgroup_dir, int port) {
    ChildProcess client({"/bin/sh", "-c",
                         "echo $$ > '" + cgroup_dir + "/cgroup.procs' && exec '" +
                             std::string(SONDE_GOTLS_WORKLOAD) + "' client " +
                             std::to_string(port) + " 200 200"});
    EXPECT_TRUE(client.wait_for_line("done 2", 20s)) << "client did not finish";
    int status = client.wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return client.pid();
  }

  std::unique_ptr<TlsProbes> probes_;
};

TEST_F(TlsProbesBpfTest, CountsFromTheFirstCallAndHonoursTheCgroupFilter) {
  const std::string root = cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string allowed = root + "/sonde-gotls-test-" + std::to_string(getpid());
  ASSERT_TRUE(std::filesystem::create_directory(allowed)) << allowed;
  struct Cleanup {
    std::string dir, root;
    ~Cleanup() {
      // Processes left in the test cgroup go back to the root before it is removed.
      std::ifstream procs(dir + "/cgroup.procs");
      for (std::string pid; std::getline(procs, pid);) std::ofstream(root + "/cgroup.procs") << pid;
      rmdir(dir.c_str());
    }
  } cleanup{allowed, root};
  struct stat st {};
  ASSERT_EQ(stat(allowed.c_str(), &st), 0);
  const uint64_t allowed_id = st.st_ino;  // a cgroup v2 id is its directory's inode number

  // The server is tracked, which attaches the probes to the file all clients run.
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  const int port = std::stoi(server.last_line().substr(std::string("listening ").size()));
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  ProcReader proc;
  TlsMonitor monitor(*probes_, cache, uprobes, proc);
  auto info = proc.read(server.pid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto candidate = open_candidate(proc, *info, true);
  ASSERT_TRUE(candidate.ok()) << candidate.error().message();
  ASSERT_EQ(monitor.consider(*candidate, {"", "", "server"}), TlsMonitor::Outcome::kTracked);
  auto verdicts = monitor.verdicts();
  ASSERT_EQ(verdicts.size(), 1u);
  ASSERT_TRUE(verdicts[0].instrumentable) << verdicts[0].reason;
  EXPECT_EQ(verdicts[0].entry_probe, "emulated-jump");

  // A second tracer (another agent) decoding the file while these probes are attached must
  // see the instructions, not the breakpoints the kernel wrote into every mapping of it.
  {
    auto other = TlsProbes::load();
    ASSERT_TRUE(other.ok()) << other.error().message();
    symbols::ProbeTargetCache other_cache;
    SharedUprobes other_uprobes;
    TlsMonitor other_monitor(**other, other_cache, other_uprobes, proc);
    auto again = open_candidate(proc, *info, true);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(other_monitor.consider(*again, {"", "", "server"}), TlsMonitor::Outcome::kTracked);
    auto v = other_monitor.verdicts();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].instrumentable) << v[0].reason;
    EXPECT_EQ(v[0].entry_probe, "emulated-jump");
    other_monitor.exited(server.pid());
  }

  // Filter on: a client in the allowed cgroup is counted (never tracked, from its first call);
  // one in the root cgroup is not, nor is the server (root cgroup).
  monitor.filter_by_cgroup(true);
  ASSERT_TRUE(monitor.allow_cgroup(allowed_id).ok());
  bool counted = false;
  pid_t in_allowed = run_client(allowed, port);
  EXPECT_EQ(requests_of(*probes_, in_allowed, &counted), 2u);
  EXPECT_TRUE(counted);
  pid_t in_root = run_client(root, port);
  EXPECT_EQ(requests_of(*probes_, in_root, &counted), 0u);
  EXPECT_FALSE(counted);
  EXPECT_EQ(requests_of(*probes_, server.pid(), &counted), 0u);
  EXPECT_FALSE(counted);

  // Filter off: every process of the file counts again.
  monitor.filter_by_cgroup(false);
  pid_t unfiltered = run_client(root, port);
  EXPECT_EQ(requests_of(*probes_, unfiltered, &counted), 2u);
  EXPECT_EQ(requests_of(*probes_, server.pid(), &counted), 2u);

  // An untracked process's counts are discarded when it exits; nothing was full.
  monitor.exited(unfiltered);
  EXPECT_FALSE(probes_->counting(static_cast<uint32_t>(unfiltered)));
  EXPECT_EQ(monitor.discarded_processes(), 1u);
  for (const auto& [map, n] : monitor.kernel_map_full()) EXPECT_EQ(n, 0u) << map;
}

// A container's series outlive its last process by the grace period, then leave: every pod
// ever seen must not keep its series until the agent restarts.
TEST_F(TlsProbesBpfTest, AContainersSeriesLeaveAGracePeriodAfterItsLastProcess) {
  symbols::ProbeTargetCache cache;
  SharedUprobes uprobes;
  ProcReader proc;
  TlsMonitor monitor(*probes_, cache, uprobes, proc, /*grace_ns=*/500'000'000);
  ChildProcess server({SONDE_GOTLS_WORKLOAD, "server"});
  ASSERT_TRUE(server.wait_for_line("listening", 20s));
  auto info = proc.read(server.pid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto candidate = open_candidate(proc, *info, true);
  ASSERT_TRUE(candidate.ok()) << candidate.error().message();
  ASSERT_EQ(monitor.consider(*candidate, {"", "", "gone-soon"}), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 1u);
  kill(server.pid(), SIGKILL);
  server.wait();
  monitor.sweep();  // finds it gone: its series stay for the grace period
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  monitor.sweep();
  EXPECT_EQ(monitor.snapshot().count({"", "", "gone-soon"}), 0u);
}

}  // namespace
}  // namespace sonde::agent
