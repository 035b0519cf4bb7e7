// Needs root and the real kernel (ctest label: bpf).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "agent/discovery/proc_reader.h"
#include "agent/procevents/process_events.h"
#include "agent/tests/child_process.h"

namespace sonde::agent {
namespace {

TEST(ProcessEventsBpf, SeesExecAndExitOfAChild) {
  std::vector<ProcessEvent> events;
  auto source = ProcessEventSource::start([&](const ProcessEvent& e) { events.push_back(e); });
  ASSERT_TRUE(source.ok()) << source.error().message();

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "exit 3", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 3);

  std::optional<ProcessEvent> exec, exit;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!exec || !exit) && std::chrono::steady_clock::now() < deadline) {
    auto n = (*source)->poll(100);
    ASSERT_TRUE(n.ok()) << n.error().message();
    for (const auto& e : events) {
      if (e.pid != static_cast<uint32_t>(child)) continue;
      if (e.kind == ProcessEvent::Kind::kExec) exec = e;
      if (e.kind == ProcessEvent::Kind::kExit) exit = e;
    }
  }
  ASSERT_TRUE(exec.has_value()) << "no exec event for pid " << child;
  ASSERT_TRUE(exit.has_value()) << "no exit event for pid " << child;
  EXPECT_EQ(exec->filename, "/bin/sh");
  EXPECT_EQ(exec->comm, "sh");
  EXPECT_EQ(exec->ppid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(exit->comm, "sh");
  EXPECT_EQ(exit->exit_code, static_cast<uint32_t>(status));
  EXPECT_LE(exec->timestamp_ns, exit->timestamp_ns);
  EXPECT_EQ((*source)->dropped(), 0u);
}

// The exec event's cgroup id (bpf_get_current_cgroup_id() in the process) is the inode of the
// process's cgroup directory. The child runs in a cgroup of its own, not the test's.
TEST(ProcessEventsBpf, TheExecsCgroupIdIsItsCgroupDirectorysInode) {
  std::stringstream mounts;
  mounts << std::ifstream("/proc/self/mounts").rdbuf();
  auto root = cgroup2_mount(mounts.str());
  if (!root) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string dir = *root + "/sonde-procevents-test-" + std::to_string(getpid());
  ASSERT_TRUE(std::filesystem::create_directory(dir)) << dir;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { rmdir(dir.c_str()); }
  } cleanup{dir};

  std::vector<ProcessEvent> events;
  auto source = ProcessEventSource::start([&](const ProcessEvent& e) { events.push_back(e); });
  ASSERT_TRUE(source.ok()) << source.error().message();
  pid_t pid = 0;
  {
    // The shell moves itself into the cgroup, then execs sleep there.
    sonde::testing::ChildProcess child(
        {"/bin/sh", "-c",
         "echo $$ > '" + dir + "/cgroup.procs' && echo in && exec /bin/sleep 1000"});
    pid = child.pid();
    ASSERT_TRUE(child.wait_for_line("in", std::chrono::seconds(10)));
    // Until it runs sleep: it must not be killed before its exec.
    const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
    std::error_code ec;
    for (int i = 0; i < 1000 && std::filesystem::read_symlink(exe, ec).filename() != "sleep"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }  // killed and reaped: the cgroup can go
  std::optional<ProcessEvent> exec;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!exec && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE((*source)->poll(100).ok());
    for (const auto& e : events) {
      if (e.pid == static_cast<uint32_t>(pid) && e.kind == ProcessEvent::Kind::kExec &&
          e.filename == "/bin/sleep") {
        exec = e;
      }
    }
  }
  ASSERT_TRUE(exec.has_value()) << "no exec event in the cgroup for pid " << pid;
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(exec->cgroup_id, st.st_ino);
}

}  // namespace
}  // namespace sonde::agent
